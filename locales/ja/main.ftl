app-name = banlieue コンソール
app-tagline = 必要なときにすぐ使えるサンドボックス VM

## Language switch
language-label = 言語
language-en = English
language-ja = 日本語

## Theme switch
theme-label = テーマ
theme-system = システム
theme-light = ライト
theme-dark = ダーク

## Sign-in card
sign-in-title = サインイン
sign-in-user-name = ユーザー名
sign-in-password = パスワード
sign-in-submit = サインイン
sign-in-submitting = サインインしています…

## Forced and voluntary password change
change-password-title = パスワードの変更
change-password-required = このパスワードは管理者が設定したものです。続ける前に新しいパスワードを設定してください。
change-password-current = 現在のパスワード
change-password-new = 新しいパスワード
change-password-confirm = 新しいパスワード（確認）
change-password-hint = 12〜128 バイト（英字は 1 文字 1 バイト、日本語は 1 文字 3 バイト）。複雑な単語より長いパスフレーズのほうが安全です。
change-password-submit = パスワードを変更

## Header and dashboard
skip-to-content = 本文へスキップ
nav-dashboard = ダッシュボード
nav-change-password = パスワードの変更
sign-out = サインアウト
signed-in-as = { $name } としてサインイン中
session-ended = セッションは終了しました。
session-ended-sign-in = もう一度サインイン
dashboard-title = ダッシュボード
dashboard-welcome = ようこそ、{ $name } さん。
dashboard-empty-title = サンドボックスはまだありません
dashboard-empty-body = プールと取得したサンドボックスがここに表示されます。
not-found-title = ページが見つかりません
not-found-body = このアドレスには何もありません。
not-found-home = ダッシュボードへ

## Errors
error-invalid-credentials = ユーザー名またはパスワードが正しくありません。
error-throttled = 失敗が続いたため、{ $seconds } 秒後にもう一度お試しください。
error-busy = ただいまパスワードの確認が混み合っています。{ $seconds } 秒後にもう一度お試しください。
error-password-too-long = パスワードは 128 バイト以内にしてください。
error-password-too-short = 新しいパスワードは 12 バイト以上にしてください。
error-missing-user-name = ユーザー名を入力してください。
error-passwords-differ = 2 つの新しいパスワードが一致しません。
error-wrong-current-password = 現在のパスワードが正しくありません。
error-invalid-form = フォームを読み取れませんでした。ページを再読み込みしてもう一度お試しください。
error-request-too-large = フォームが大きすぎるため受け付けられません。
error-cross-site = 別のサイトからのリクエストのため拒否しました。
error-not-signed-in = 続けるにはサインインしてください。
error-page-sign-in = サインイン
error-page-change-password = パスワードを変更する
error-must-change-password = まずパスワードを変更してください。
error-internal = サーバー側で問題が発生しました。参照番号: { $reference }
error-forbidden = この操作を行う権限がありません。
error-not-found = そのユーザーは存在しません。
error-invalid-user-name = ユーザー名は英小文字・数字・「-」で 1〜63 文字、英字で始まり「-」で終わらない形にしてください。
error-invalid-roles = ロール名は英小文字・数字・「-」で英字で始まる 31 文字以内、ロールは 16 個までです。
error-role-not-held = 自分が持っていないロール { $role } は付与できません。
error-field-too-long = 表示名とメールアドレスは 200 文字以内にしてください。
error-name-taken = この名前のユーザーはすでに存在します。
error-conflict = その間に別の人がこのユーザーを変更しました。最新の内容を表示しているので、もう一度変更してください。
error-role-exists = この名前のロールはすでに存在します。別の名前にするか、一覧からそのロールを編集してください。
error-role-changed = その間に別の人がこのロールを変更しました。最新の内容をフォームに表示しているので、もう一度変更してください。
error-last-admin = 最後の有効な管理者は、無効化・削除・admin ロールの削除ができません。
error-confirmation-mismatch = 確認のため、ユーザー名を正確に入力してください。
error-invalid-date = 日付は YYYY-MM-DD の形で入力してください。

error-password-unchanged = 新しいパスワードは現在のパスワードと違うものにしてください。
error-hidden-characters = 表示名とメールアドレスに、別の文字列に見せかけられる文字は使えません：見えない文字や表示順を変える文字（制御文字、ゼロ幅スペース、右から左への上書き、行区切り、空白に見える文字）、英数字の後の異体字セレクタ、単独の結合文字。
error-invalid-email = メールアドレスの形式が正しくありません（例: name@example.org）。
error-method-not-allowed = このアドレスはフォームの送信専用です。前のページに戻ってボタンを使ってください。

## Notices
notice-user-created = ユーザーを作成しました。
notice-user-saved = 変更を保存しました。
notice-user-disabled = ユーザーを無効にしました。すべてのセッションが終了しました。
notice-user-enabled = ユーザーを有効にしました。
notice-password-reset = パスワードをリセットしました。次回サインイン時に変更が必要です。セッションはすべて終了しました。
notice-sessions-revoked = このユーザーのすべてのセッションを終了しました。
notice-user-deleted = ユーザー { $name } を削除しました。
notice-session-revoked = セッションを終了しました。

## Navigation
nav-users = ユーザー
nav-account = アカウント
nav-audit = 監査ログ

## Users
users-title = ユーザー
users-search = 検索
users-search-placeholder = 名前、表示名、メールアドレス
users-search-submit = 検索
users-empty = 該当するユーザーはいません。
users-count = { $total } 人
users-col-name = 名前
users-col-display-name = 表示名
users-col-email = メールアドレス
users-col-roles = ロール
users-col-tenant = テナント
users-col-state = 状態
users-col-last-sign-in = 最終サインイン
users-never = なし
state-active = 有効
state-disabled = 無効
state-must-change = パスワード変更待ち
pager-previous = 前へ
pager-next = 次へ
pager-position = { $page } / { $pages } ページ
user-create-title = ユーザーの作成
user-field-name = ユーザー名
user-field-display-name = 表示名
user-field-email = メールアドレス
user-field-roles = ロール
user-field-roles-hint = スペースかカンマで区切ります（例: developer viewer）。
user-password-generate = パスワードを自動生成する（一度だけ表示）
user-password-typed = 次のパスワードを設定する:
user-create-submit = ユーザーを作成
user-shown-password-title = 新しいパスワード（一度だけ表示）
user-shown-password-body = 安全な方法で { $name } さんに伝えてください。初回サインイン時に変更が必要です。保存されず、二度と表示されません。
user-copy = コピー
user-edit-title = プロフィールとロール
user-save = 変更を保存
user-actions-title = 操作
user-disable = ユーザーを無効にする
user-enable = ユーザーを有効にする
user-reset-password = パスワードをリセット
user-revoke-sessions = すべてのセッションを終了
user-delete-title = ユーザーの削除
user-delete-hint = 確認のため { $name } と入力してください。元に戻せません。
user-delete-confirm = 確認用のユーザー名
user-delete-submit = ユーザーを削除
user-back = ユーザー一覧へ

## My account
account-title = アカウント
account-change-password = パスワードの変更
account-sessions-title = セッション
account-sessions-col-created = サインイン
account-sessions-col-last-seen = 最終アクセス
account-sessions-col-ip = アドレス
account-sessions-col-agent = ブラウザー
account-session-current = このブラウザー
account-session-revoke = 終了
account-sign-out-everywhere = すべての場所からサインアウト

## Audit log
audit-title = 監査ログ
audit-filter-actor = 実行者
audit-filter-action = 操作
audit-filter-target = 対象
audit-filter-result = 結果
audit-filter-since = 開始日（UTC）
audit-filter-until = 終了日（UTC）
audit-filter-submit = 絞り込む
audit-empty = 該当するイベントはありません。
audit-col-at = 日時（UTC）
audit-col-ip = アドレス

# The audit log's action and result codes, shown beside their code.
audit-action-session-sign-in = サインイン
audit-action-session-sign-out = サインアウト
audit-action-session-revoke = セッションの終了
audit-action-session-revoke-all = すべてのセッションからサインアウト
audit-action-user-create = ユーザーの作成
audit-action-user-update = プロフィールの変更
audit-action-user-roles = ロールの変更
audit-action-user-disable = ユーザーの無効化
audit-action-user-enable = ユーザーの有効化
audit-action-user-delete = ユーザーの削除
audit-action-user-password-set = 管理者によるパスワード設定
audit-action-user-password-change = パスワードの変更
audit-action-user-sessions-revoke = 管理者によるセッション終了
audit-action-role-create = ロールの作成
audit-action-role-update = ロールの変更
audit-action-role-save = ロールの保存
audit-action-role-delete = ロールの削除
audit-action-pool-save = プールの保存
audit-action-pool-delete = プールの削除
audit-action-claim-create = サンドボックスの確保
audit-action-claim-release = サンドボックスの解放
audit-action-oidc-token-issue = トークンの発行
audit-action-oidc-token-refresh = トークンの更新
audit-action-oidc-token-revoke = トークンの失効
audit-action-oidc-code-replay = 認可コードの再利用
audit-action-oidc-refresh-reuse = リフレッシュトークンの再利用
audit-action-request-cross-site = クロスサイトリクエスト
audit-result-success = 成功
audit-result-forbidden = 拒否
audit-result-not-found = 見つかりません
audit-result-conflict = 競合
audit-result-invalid = 不正な入力
audit-result-no-cluster = クラスターなし
audit-result-unavailable = 利用不可
audit-result-error = エラー
audit-result-throttled = 制限中
audit-result-busy = 混雑
audit-result-invalid-credentials = 名前またはパスワードの誤り
audit-result-wrong-password = パスワードの誤り
audit-result-refused = 拒否
audit-result-revoked = 失効
audit-result-name-taken = 名前が使用済み
audit-result-last-admin = 最後の管理者
audit-result-role-not-held = 保有していないロール
audit-result-untrusted = 信頼されていない

## OIDC authorization and kubeconfig
authorize-client-cli = コマンドラインツール
authorize-sign-in-title = サインインして{ $client }に進みます
authorize-confirm = { $name } として{ $client }に進みますか?
authorize-confirm-detail = ユーザー名とロールを含む短期間有効なトークンが渡され、Kubernetes はそれをあなたとして扱います。
authorize-continue = 続行
authorize-cancel = キャンセル
error-invalid-authorization-request = このサインインリンクは使用できません: { $reason }。リンクを開いたツールからやり直してください。
error-no-cluster-configured = コンソールに Kubernetes クラスターが設定されていないため、ダウンロードできる kubeconfig はありません。
account-kubeconfig-title = Kubernetes へのアクセス
account-kubeconfig-help = banlieue コマンドラインツールでサインインする kubectl 用の kubeconfig です。パスワードやトークンは含まれません。
account-kubeconfig-download = kubeconfig をダウンロード
authorize-switch-account = 別のアカウントを使う
error-authorize-unknown-client = 移動元のアプリケーションはこのコンソールに登録されていません
error-authorize-redirect = 戻り先のアドレスはこのアプリケーションに登録されていません
error-authorize-malformed-state = リクエストの state または nonce の形式が正しくありません

## Dashboard: pools and claims
dashboard-no-cluster = コンソールは Kubernetes クラスターに接続されていません。
dashboard-pools-title = プール
dashboard-no-pools = 表示できるプールはありません。
dashboard-pool-counts = 準備完了 { $ready } · 使用中 { $claimed } · 上限 { $max }
dashboard-claim-ttl = 利用期間
dashboard-claim-submit = サンドボックスを確保
dashboard-claim-submitting = 確保しています…
dashboard-claim-forbidden = あなたのロールではここで確保できません。
dashboard-claims-title = 自分のサンドボックス
dashboard-no-claims = サンドボックスはありません。プールから確保してください。
dashboard-col-name = 名前
dashboard-col-pool = プール
dashboard-col-phase = 状態
dashboard-col-expires = 期限
dashboard-col-addresses = アドレス
dashboard-expires-in = あと { $minutes } 分
dashboard-expires-soon = 1 分以内
countdown-milestone = { $name } はあと { $minutes } 分で期限切れになります
countdown-expired = { $name } は期限切れになりました
dashboard-expires-in-hours = あと { $hours } 時間 { $minutes } 分
dashboard-connect = 接続コマンド
dashboard-copy = コピー
copy-done = コピーしました
copy-failed = コピーできませんでした。テキストを選択して手動でコピーしてください。
dashboard-release = 解放…
dashboard-release-confirm = { $name } を今すぐ解放しますか? VM は削除されます。
dashboard-release-submit = 解放
dashboard-release-submitting = 解放しています…
dashboard-refresh-hint = JavaScript が有効ならこのページは自動で更新されます。無効な場合は再読み込みしてください。
ttl-minutes = { $minutes } 分
ttl-hours = { $hours } 時間
phase-pending = 待機中
phase-bound = 割り当て済み
phase-releasing = 解放中
phase-failed = 失敗
notice-claim-created = { $name } を作成しました。サンドボックスの準備ができ次第割り当てられます。
notice-claim-created-settled = { $name } を作成しました。
notice-claim-released = { $name } を解放しています。
error-kubernetes = Kubernetes が拒否しました: { $message }
error-invalid-claim = 表示されたプールと利用期間から選んでください。
dashboard-all-claims-title = すべてのサンドボックス
dashboard-col-subject = 利用者
account-access-title = 何ができますか?
account-access-help = すべての名前空間で Kubernetes があなたに許可していること (SelfSubjectAccessReview によりあなたとして確認)。ロールによって決まります。
account-access-resource = リソース
account-access-allowed = 許可
account-access-denied = 不許可

## Roles
nav-roles = ロール
roles-title = ロール
roles-builtin-title = 組み込みロール
roles-custom-title = カスタムロール
roles-custom-none = カスタムロールはまだありません。
roles-builtin-none = クラスターに組み込みロールがありません。
roles-name = 名前
roles-rules = Kubernetes で許可されること
roles-holders = 保有者
roles-actions = 操作
roles-edit = 編集
roles-delete = 削除…
roles-delete-confirm = このロールを削除
roles-form-title = カスタムロールの作成
roles-form-edit-title = カスタムロール { $name } の変更
roles-form-new = 代わりに新しいロールを作成
roles-form-help = ロールはグループ console:<名前> に結び付けられた ClusterRole になります。ユーザーのページで付与してください。チェックした権限を付与できるかは Kubernetes が判断します。
roles-save = ロールを保存
form-saving = 保存しています…
notice-role-saved = ロール { $name } を保存しました。
notice-role-deleted = ロール { $name } を削除しました。
error-invalid-role = カスタムロールには組み込みでない新しい名前 (小文字で始まり、英小文字・数字・- のみ) と、少なくとも 1 つの権限が必要です。
ttl-seconds = { $seconds } 秒

## Pools
nav-pools = プール
pools-title = プール
pools-name = 名前
pools-namespace = 名前空間
pools-sizes = 規模
pools-size-line = ウォーム { $warm }、上限 { $max } — 準備完了 { $ready }、使用中 { $claimed }、合計 { $total }
pools-image = イメージ
pools-revision = イメージのリビジョン
pools-warm = ウォーム (準備完了・未使用)
pools-max = 上限
pools-cpu = CPU 数
pools-memory = メモリ (例: 4Gi)
pools-provider = プロバイダー
pools-save = プールを保存
pools-form-title = プールの作成・変更
pools-none = プールはまだありません。
pools-read-only = プールを見ることはできますが、あなたのロールでは Kubernetes がプールの作成・変更を許可していません。
pools-delete-confirm = このプールを削除
notice-pool-saved = プール { $name } を保存しました。
notice-pool-deleted = プール { $name } を削除しました。使用中のサンドボックスは解放されるまで残ります。
error-invalid-pool = プールを確認してください: 名前空間・名前・プロバイダー (英小文字・数字・-)、ウォーム ≤ 上限、上限は 1〜10,000、CPU は 1〜1,024、メモリは 512Mi や 4Gi のような量、イメージ (512 文字以内) とリビジョン (128 文字以内)。

## Claim detail
claim-back = ← ダッシュボード
claim-pool = プール
claim-subject = 利用者
claim-issuer = ID プロバイダー
claim-lifetime = 利用期間
claim-created = 申請日時
claim-bound = 割り当て日時
claim-expires = 期限
claim-vm = 仮想マシン
claim-connect-title = 接続
claim-no-address = アドレスはサンドボックスが割り当てられると表示されます。
claim-gone = このサンドボックスは存在しません。解放されたか、期限が切れました。
claim-not-yet = まだ
claim-reason-no-ready-member = 待機中: プール { $pool } に空いているサンドボックスがまだありません。準備ができ次第割り当てられます。
claim-reason-pool-not-found = 待機中: プール { $pool } は存在しません。
claim-reason-vm-gone = 仮想マシンがなくなりました。別の仮想マシンが割り当てられることはありません。解放して新しいサンドボックスを確保してください。
claim-reason-released = 解放済み: 仮想マシンを削除しています。
claim-reason-expired = 期限切れ: 利用期間が終わり、仮想マシンを削除しています。
claim-attestation-title = アテステーション
claim-attestation-verified = EK 証明書はプロバイダーのトラストバンドルにつながっています。ブローカーはこのサンドボックスとアテステーション済みの通信路を開けます。
claim-attestation-unverified = 検証されていません。このサンドボックスの vTPM を信頼しないでください。
claim-attestation-none = EK 証明書はサンドボックスが割り当てられると表示されます。
claim-ek-fingerprint = SHA-256 フィンガープリント
claim-ek-issuer = 発行者
claim-ek-identity = 識別子
claim-ek-trusted = プロバイダーのトラストバンドルにつながっています
claim-ek-untrusted = プロバイダーのトラストバンドルにつながっていません
claim-ek-unchecked = 確認できません
