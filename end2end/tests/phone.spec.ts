import { Browser, Locator, Page } from '@playwright/test';
import { test, expect, makePerson, open, signIn, signInAsAdmin, until, Person, JAPANESE_SIGN_IN } from './fixtures';

// Phone width (390 px), English and Japanese, JavaScript on and off: no page with a
// table is wider than the screen (the dashboard with My and All sandboxes, a claim's
// page, Pools, Users, a user, Roles, the audit log, My account with What can I do? and
// My sessions), and every button and the countdown of a sandbox are on it (not in a
// table scrolled sideways). Before the fix /roles was 546 px wide ("編集" wrapped per
// character) and the dashboard's Expires and Release sat past the right edge; Users,
// the audit log, My account and Pools scrolled sideways until their tables stacked too.

test.describe.configure({ mode: 'serial' });

const WIDTH = 390;

const LANGUAGES = [
  {
    locale: 'en-US',
    userName: 'User name',
    password: 'Password',
    signIn: 'Sign in',
    lifetime: 'Lifetime',
    claim: 'Claim a sandbox',
    bound: 'Bound',
    release: 'Release…',
    releaseNow: 'Release',
    edit: 'Edit',
    end: 'End',
  },
  {
    locale: 'ja-JP',
    userName: 'ユーザー名',
    password: 'パスワード',
    signIn: 'サインイン',
    lifetime: '利用期間',
    claim: 'サンドボックスを確保',
    bound: '割り当て済み',
    release: '解放…',
    releaseNow: '解放',
    edit: '編集',
    end: '終了',
  },
];

/** The page is no wider than the screen: nothing to scroll sideways. */
async function fitsTheScreen(page: Page): Promise<void> {
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(width, `${page.url()} is ${width} px wide`).toBeLessThanOrEqual(WIDTH);
}

/** `locator` is visible, on one line (see sandboxes.spec.ts) and inside the screen. */
async function onScreen(locator: Locator): Promise<void> {
  await expect(locator).toBeVisible();
  const box = (await locator.boundingBox())!;
  expect(box.x, `${await locator.textContent()} starts on the screen`).toBeGreaterThanOrEqual(0);
  expect(box.x + box.width, `${await locator.textContent()} ends on the screen`).toBeLessThanOrEqual(WIDTH);
  expect(box.height, `${await locator.textContent()} on one line`).toBeLessThan(40);
}

/** A phone in `locale`, signed in as `who`. */
async function phone(browser: Browser, baseURL: string, js: boolean, locale: string, who: Person, words: (typeof LANGUAGES)[0]) {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale, viewport: { width: WIDTH, height: 844 } });
  const page = await context.newPage();
  await open(page, '/sign-in', js);
  await signIn(page, who.name, who.password, words);
  await expect(page.getByTestId('welcome')).toBeVisible();
  return page;
}

let operator: Person;

test('an operator, and a custom role to list', async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(60_000);
  const baseURL = info.project.use.baseURL!;
  operator = await makePerson(browser, baseURL, initialPassword, 'phil-phone', ['operator']);
  // /roles shows Edit for custom roles only.
  await signInAsAdmin(page, initialPassword);
  await page.goto('/roles');
  await page.getByLabel('Name', { exact: true }).fill('phone-reader');
  await page.getByLabel('get virtualmachinepools').check();
  await page.getByLabel('list virtualmachinepools').check();
  await page.getByRole('button', { name: 'Save role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role phone-reader saved.');
});

for (const words of LANGUAGES) {
  test(`every page with a table at ${WIDTH} px, ${words.locale}`, async ({ browser, initialPassword }, info) => {
    test.setTimeout(120_000);
    const js = info.project.use.javaScriptEnabled !== false;
    const baseURL = info.project.use.baseURL!;

    // The operator's dashboard with a sandbox of theirs, mine and everyone's; its page.
    const page = await phone(browser, baseURL, js, words.locale, operator, words);
    const pool = page.locator('[data-pool="sandbox"]');
    await pool.getByLabel(words.lifetime).selectOption('900');
    await pool.getByRole('button', { name: words.claim }).click();
    const claim = page.getByTestId('claim').first();
    await until(page, js, async (timeout) => {
      await expect(claim.getByTestId('phase')).toHaveText(words.bound, { timeout });
    });
    await fitsTheScreen(page);
    await onScreen(claim.getByTestId('countdown'));
    await onScreen(claim.getByText(words.release));
    // All sandboxes has the same claim, with its subject.
    const name = (await claim.getAttribute('data-claim'))!;
    const everyone = page.locator(`[data-testid="any-claim"][data-claim="${name}"]`);
    await onScreen(everyone.getByTestId('countdown'));
    await onScreen(everyone.getByText(words.release));
    await open(page, `/claims/demo/${name}`, js);
    await fitsTheScreen(page);
    await onScreen(page.getByTestId('countdown'));

    // Pools, with the operator's Edit; My account: What can I do? and My sessions (the
    // operator's other session, from makePerson, has its End).
    await open(page, '/pools', js);
    await expect(page.getByTestId('pools-table')).toBeVisible();
    await fitsTheScreen(page);
    await onScreen(page.locator('[data-pool="sandbox"]').getByRole('link', { name: words.edit }));
    await open(page, '/account', js);
    await expect(page.getByTestId('access-table')).toBeVisible();
    await expect(page.getByTestId('sessions-table')).toBeVisible();
    await fitsTheScreen(page);
    await onScreen(page.locator('tr[data-current="false"]').first().getByRole('button', { name: words.end }));

    await open(page, '/', js);
    await claim.getByText(words.release).click();
    await claim.getByRole('button', { name: words.releaseNow, exact: true }).click();
    await until(page, js, async (timeout) => {
      await expect(page.getByTestId('claim')).toHaveCount(0, { timeout });
    });
    await page.context().close();

    // The admin's pages: Users, a user, Roles, the audit log.
    // (signInAsAdmin speaks English; the language cookie then chooses.)
    const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'en-US', viewport: { width: WIDTH, height: 844 } });
    const adminPage = await context.newPage();
    await signInAsAdmin(adminPage, initialPassword);
    await context.addCookies([{ name: 'banlieue-lang', value: words.locale.slice(0, 2), url: baseURL }]);
    for (const [path, table] of [
      ['/users', 'users-table'],
      ['/users/phil-phone', 'role-choices'],
      ['/roles', 'custom-roles-table'],
      ['/audit', 'audit-table'],
    ]) {
      await open(adminPage, path, js);
      await expect(adminPage.getByTestId(table)).toBeVisible();
      await fitsTheScreen(adminPage);
    }
    await open(adminPage, '/roles', js);
    const role = adminPage.locator('[data-role="phone-reader"]');
    await onScreen(role.getByRole('link', { name: words.edit }));
    await onScreen(adminPage.getByLabel('patch virtualmachinepools'));
    await context.close();
  });
}

test('the custom role goes again', async ({ page, initialPassword }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await signInAsAdmin(page, initialPassword);
  await open(page, '/roles', js);
  const role = page.locator('[data-role="phone-reader"]');
  await role.getByText('Delete…').click();
  await role.getByRole('button', { name: 'Delete this role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role phone-reader deleted.');
});

test('the header stays on one line at 1280 px, in Japanese too', async ({ browser, initialPassword }, info) => {
  // The admin's header has every entry. It wrapped to two lines in Japanese.
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  for (const language of ['en', 'ja']) {
    const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'en-US', viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await signInAsAdmin(page, initialPassword);
    await context.addCookies([{ name: 'banlieue-lang', value: language, url: baseURL }]);
    await open(page, '/', js);
    const header = page.getByRole('banner');
    const middle = async (locator: Locator) => {
      const box = (await locator.boundingBox())!;
      return box.y + box.height / 2;
    };
    const first = await middle(header.getByRole('link').first());
    const last = await middle(header.getByRole('button').last());
    expect(Math.abs(first - last), `${language}: the first and last entries share a line`).toBeLessThan(8);
    expect((await header.boundingBox())!.height, `${language}: one line high`).toBeLessThan(70);
    await context.close();
  }
});

test('the sign-in card, the password change and the authorization card at 390 px, in Japanese', async ({ browser, initialPassword }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const who = await makePerson(browser, baseURL, initialPassword, 'nina-phone', ['viewer'], { firstSignIn: false });
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'ja-JP', viewport: { width: WIDTH, height: 844 } });
  const page = await context.newPage();
  await open(page, '/sign-in', js);
  await expect(page.getByRole('heading', { name: 'サインイン' })).toBeVisible();
  await fitsTheScreen(page);
  await signIn(page, who.name, who.password, JAPANESE_SIGN_IN);
  await expect(page.getByRole('heading', { name: 'パスワードの変更' })).toBeVisible();
  await fitsTheScreen(page);
  const chosen = 'nina chose a passphrase';
  await page.getByLabel('現在のパスワード').fill(who.password);
  await page.getByLabel('新しいパスワード', { exact: true }).fill(chosen);
  await page.getByLabel('新しいパスワード（確認）').fill(chosen);
  await page.getByRole('button', { name: 'パスワードを変更' }).click();
  await expect(page.getByTestId('welcome')).toBeVisible();
  const authorize =
    '/oidc/authorize?response_type=code&client_id=banlieue-cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A53124%2Fcallback' +
    '&scope=openid&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256';
  await open(page, authorize, js);
  await expect(page.getByText('nina-phone としてコマンドラインツールに進みますか?')).toBeVisible();
  await fitsTheScreen(page);
  await expect(page.getByRole('button', { name: '続行' })).toBeInViewport();
  await context.close();
});
