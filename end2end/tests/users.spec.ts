import { Browser, Page } from '@playwright/test';
import { test, expect, open, signIn, NEW_ADMIN_PASSWORD } from './fixtures';

// User administration after console.spec.ts made the first admin usable: create a user
// with a generated password, reset it, end a session from My sessions, the last-admin
// guard (in Japanese), and the audit log that recorded all of it. JavaScript on and off.

test.describe.configure({ mode: 'serial' });

const ALICE_PASSWORD = 'alice chose this passphrase';

async function person(browser: Browser, baseURL: string | undefined, javaScriptEnabled: boolean | undefined): Promise<Page> {
  const context = await browser.newContext({ baseURL, javaScriptEnabled, locale: 'en-US' });
  return context.newPage();
}

async function adminPage(page: Page, js: boolean): Promise<void> {
  await open(page, '/sign-in', js);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await expect(page.getByTestId('welcome')).toBeVisible();
}

test('an admin creates a user who must change the generated password', async ({ page, browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await adminPage(page, js);
  await page.getByRole('link', { name: 'Users' }).click();
  await expect(page.getByRole('heading', { name: 'Users' })).toBeVisible();
  await page.getByLabel('User name').fill('alice');
  await page.getByLabel('Display name').fill('Alice Liddell');
  await page.getByLabel('E-mail').fill('alice@example.test');
  await page.getByLabel('Roles').fill('developer viewer');
  await page.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByRole('status')).toHaveText('User created.');
  const generated = await page.getByTestId('shown-password').inputValue();
  expect(generated).toMatch(/^[A-Za-z0-9]{24}$/);

  const alice = await person(browser, info.project.use.baseURL, info.project.use.javaScriptEnabled);
  await alice.goto('/sign-in');
  await signIn(alice, 'alice', generated);
  await expect(alice).toHaveURL(/\/change-password$/);
  await alice.getByLabel('Current password').fill(generated);
  await alice.getByLabel('New password', { exact: true }).fill(ALICE_PASSWORD);
  await alice.getByLabel('Repeat the new password').fill(ALICE_PASSWORD);
  await alice.getByRole('button', { name: 'Change password' }).click();
  await expect(alice.getByTestId('welcome')).toHaveText('Welcome, Alice Liddell.');
  await alice.context().close();

  await page.goto('/users?q=alice');
  await expect(page.getByTestId('users-table')).toContainText('developer, viewer');
});

test("resetting a password ends the user's open session", async ({ page, browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const alice = await person(browser, info.project.use.baseURL, info.project.use.javaScriptEnabled);
  await alice.goto('/sign-in');
  await signIn(alice, 'alice', ALICE_PASSWORD);
  await expect(alice.getByTestId('welcome')).toBeVisible();

  await adminPage(page, js);
  await page.goto('/users/alice');
  await page.getByRole('button', { name: 'Reset password' }).click();
  await expect(page.getByRole('status')).toContainText('Password reset.');
  await expect(page.getByTestId('shown-password')).toHaveValue(/^[A-Za-z0-9]{24}$/);

  await alice.goto('/');
  await expect(alice).toHaveURL(/\/sign-in$/);
  await alice.context().close();
});

test('ending a session in My sessions signs that browser out', async ({ page, browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const laptop = await person(browser, info.project.use.baseURL, info.project.use.javaScriptEnabled);
  await laptop.goto('/sign-in');
  await signIn(laptop, 'admin', NEW_ADMIN_PASSWORD);
  await expect(laptop.getByTestId('welcome')).toBeVisible();

  await adminPage(page, js);
  await page.getByRole('link', { name: 'My account' }).click();
  // Earlier tests left sessions of their own: end every other one, one at a time.
  const others = page.locator('tr[data-current="false"]');
  await expect(page.locator('tr[data-current="true"]')).toHaveCount(1);
  for (let left = await others.count(); left > 0; left--) {
    await others.first().getByRole('button', { name: 'End' }).click();
    await expect(page.getByRole('status')).toHaveText('Session ended.');
    await expect(others).toHaveCount(left - 1);
  }

  await laptop.goto('/');
  await expect(laptop).toHaveURL(/\/sign-in$/);
  await laptop.context().close();
});

test('the last admin cannot be disabled (in Japanese)', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await adminPage(page, js);
  await page.goto('/users/admin');
  await page.getByRole('button', { name: '日本語' }).click();
  await expect(page.getByRole('heading', { name: 'プロフィールとロール' })).toBeVisible();
  await page.getByRole('button', { name: 'ユーザーを無効にする' }).click();
  await expect(page.getByRole('alert')).toHaveText(
    '最後の有効な管理者は、無効化・削除・admin ロールの削除ができません。',
  );
  await page.getByRole('button', { name: 'English' }).click();
});

test('the audit log shows each of these', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await adminPage(page, js);
  await page.getByRole('link', { name: 'Audit log' }).click();
  const table = page.getByTestId('audit-table');
  for (const action of ['user.create', 'user.password-change', 'user.password-set', 'session.revoke', 'user.disable']) {
    await expect(table).toContainText(action);
  }
  await page.getByLabel('Action').fill('user.disable');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(table.locator('tbody tr')).toHaveCount(1);
  await expect(table).toContainText('last-admin');
  const row = table.locator('tbody tr');
  await expect(row.getByTestId('audit-action')).toHaveText('user.disable');
  await expect(row).toContainText('User disabled');
  await expect(row).toContainText('Last admin');

  // In Japanese the codes are in words, each with its code beside it (what the filters
  // match), the filter kept.
  await page.getByRole('button', { name: '日本語' }).click();
  await expect(page.getByRole('heading', { name: '監査ログ' })).toBeVisible();
  await expect(row).toHaveCount(1);
  await expect(row).toContainText('ユーザーの無効化');
  await expect(row.getByTestId('audit-action')).toHaveText('user.disable');
  await expect(row).toContainText('最後の管理者');
  await expect(row.getByTestId('audit-result')).toHaveText('last-admin');
  await page.getByRole('button', { name: 'English' }).click();
});
