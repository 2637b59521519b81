app-name = banlieue コンソール
app-tagline = 必要なときにすぐ使えるサンドボックス VM

## Language switch
language-label = 言語
language-en = English
language-ja = 日本語

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
nav-dashboard = ダッシュボード
nav-change-password = パスワードの変更
sign-out = サインアウト
signed-in-as = { $name } としてサインイン中
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
error-password-too-long = パスワードは 128 バイト以内にしてください。
error-password-too-short = 新しいパスワードは 12 バイト以上にしてください。
error-missing-user-name = ユーザー名を入力してください。
error-passwords-differ = 2 つの新しいパスワードが一致しません。
error-wrong-current-password = 現在のパスワードが正しくありません。
error-invalid-form = フォームを読み取れませんでした。ページを再読み込みしてもう一度お試しください。
error-request-too-large = フォームが大きすぎるため受け付けられません。
error-cross-site = 別のサイトからのリクエストのため拒否しました。
error-not-signed-in = 続けるにはサインインしてください。
error-must-change-password = まずパスワードを変更してください。
error-internal = サーバー側で問題が発生しました。参照番号: { $reference }
