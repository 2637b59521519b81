import { Locator, Page } from '@playwright/test';
import { test, expect, open, signIn, until, NEW_ADMIN_PASSWORD } from './fixtures';

// Phone width (390 px), English and Japanese, JavaScript on and off: no page is wider
// than the screen, and every button and the countdown of a sandbox are on it (not in a
// table scrolled sideways). Before the fix /roles was 546 px wide ("編集" wrapped per
// character) and the dashboard's Expires and Release sat past the right edge.

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

test('a custom role to list', async ({ page }, info) => {
  // /roles shows Edit for custom roles only.
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, '/sign-in', js);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await page.goto('/roles');
  await page.getByLabel('Name', { exact: true }).fill('phone-reader');
  await page.getByLabel('get virtualmachinepools').check();
  await page.getByLabel('list virtualmachinepools').check();
  await page.getByRole('button', { name: 'Save role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role phone-reader saved.');
});

for (const words of LANGUAGES) {
  test(`the dashboard and the roles at ${WIDTH} px, ${words.locale}`, async ({ browser }, info) => {
    test.setTimeout(90_000);
    const js = info.project.use.javaScriptEnabled !== false;
    const context = await browser.newContext({
      baseURL: info.project.use.baseURL,
      javaScriptEnabled: js,
      locale: words.locale,
      viewport: { width: WIDTH, height: 844 },
    });
    const page = await context.newPage();
    await open(page, '/sign-in', js);
    await page.getByLabel(words.userName).fill('admin');
    await page.getByLabel(words.password, { exact: true }).fill(NEW_ADMIN_PASSWORD);
    await page.getByRole('button', { name: words.signIn }).click();
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
    // The admin's All sandboxes has the same claim, with its subject.
    const everyone = page.locator(`[data-testid="any-claim"][data-claim="${await claim.getAttribute('data-claim')}"]`);
    await onScreen(everyone.getByTestId('countdown'));
    await onScreen(everyone.getByText(words.release));

    await page.goto('/roles');
    await fitsTheScreen(page);
    const role = page.locator('[data-role="phone-reader"]');
    await onScreen(role.getByRole('link', { name: words.edit }));
    await onScreen(page.getByLabel('patch virtualmachinepools'));

    await page.goto('/');
    await claim.getByText(words.release).click();
    await claim.getByRole('button', { name: words.releaseNow, exact: true }).click();
    await until(page, js, async (timeout) => {
      await expect(page.getByTestId('claim')).toHaveCount(0, { timeout });
    });
    await context.close();
  });
}

test('the custom role goes again', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, '/sign-in', js);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await page.goto('/roles');
  const role = page.locator('[data-role="phone-reader"]');
  await role.getByText('Delete…').click();
  await role.getByRole('button', { name: 'Delete this role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role phone-reader deleted.');
});
