import { ConsoleProcess, startConsole } from '../console-process';
import { ownConsolePort } from '../servers';
import { test, expect, open, signIn, NEW_ADMIN_PASSWORD } from './fixtures';

// One person's first day, in order: a refused sign-in, the language switch, the first
// admin's forced password change, the dashboard, sign-out. Run once with JavaScript and
// once without (see playwright.config.ts), each time on a console of this file's own
// (no cluster): its first admin is nobody else's, and its refused sign-ins slow nobody
// else down, so the other files need not follow this one.

test.describe.configure({ mode: 'serial' });

let first: ConsoleProcess;
/** The address of `path` on this file's console. */
const at = (path: string) => `${first.baseURL}${path}`;

test.beforeAll(async ({}, info) => {
  info.setTimeout(60_000);
  first = await startConsole(`first-day-${info.project.name}`, ownConsolePort(info.parallelIndex), false);
});

test.afterAll(async () => {
  await first?.stop();
});

test('the sign-in card refuses a wrong password and an unknown user alike', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, at('/'), js);
  await expect(page).toHaveURL(/\/sign-in$/);
  await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();

  await signIn(page, 'admin', 'definitely not it');
  const alert = page.getByRole('alert');
  await expect(alert).toHaveText('The user name or password is wrong.');
  await expect(page.getByLabel('User name')).toHaveValue('admin');

  await signIn(page, 'nobody-here', 'definitely not it');
  await expect(page.getByRole('alert')).toHaveText('The user name or password is wrong.');
  await expect(page.getByLabel('User name')).toHaveValue('nobody-here');
});

test('the language switch changes the card and is remembered', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, at('/sign-in'), js);
  await page.getByRole('button', { name: '日本語' }).click();
  await expect(page.getByRole('heading', { name: 'サインイン' })).toBeVisible();
  await expect(page.locator('html')).toHaveAttribute('lang', 'ja');

  await open(page, at('/sign-in'), js);
  await expect(page.getByRole('heading', { name: 'サインイン' })).toBeVisible();
  await page.getByLabel('ユーザー名').fill('admin');
  await page.getByLabel('パスワード', { exact: true }).fill('wrong password');
  await page.getByRole('button', { name: 'サインイン' }).click();
  await expect(page.getByRole('alert')).toHaveText('ユーザー名またはパスワードが正しくありません。');

  await page.getByRole('button', { name: 'English' }).click();
  await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();
});

test('a Japanese browser gets the Japanese card', async ({ browser }, info) => {
  const context = await browser.newContext({
    locale: 'ja-JP',
    baseURL: first.baseURL,
    javaScriptEnabled: info.project.use.javaScriptEnabled,
  });
  const page = await context.newPage();
  await page.goto('/sign-in');
  await expect(page.getByRole('heading', { name: 'サインイン' })).toBeVisible();
  await context.close();
});

test('the first admin must change the password, then reaches the dashboard', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, at('/sign-in'), js);
  await signIn(page, 'admin', first.initialPassword);
  await expect(page).toHaveURL(/\/change-password$/);
  await expect(page.getByTestId('must-change')).toBeVisible();

  // The dashboard is out of reach until the password changes.
  await page.goto(at('/'));
  await expect(page).toHaveURL(/\/change-password$/);

  await page.getByLabel('Current password').fill('not the current one');
  await page.getByLabel('New password', { exact: true }).fill(NEW_ADMIN_PASSWORD);
  await page.getByLabel('Repeat the new password').fill(NEW_ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Change password' }).click();
  await expect(page.getByRole('alert')).toHaveText('The current password is wrong.');

  await page.getByLabel('Current password').fill(first.initialPassword);
  await page.getByLabel('New password', { exact: true }).fill(NEW_ADMIN_PASSWORD);
  await page.getByLabel('Repeat the new password').fill(NEW_ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Change password' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('welcome')).toHaveText('Welcome, admin.');
  await expect(page.getByTestId('signed-in-as')).toHaveText('Signed in as admin');
  await expect(page.getByRole('button', { name: 'Sign out' })).toBeVisible();
});

test('sign-out ends the session; the new password signs in again', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, at('/sign-in'), js);
  await signIn(page, 'admin', first.initialPassword);
  await expect(page.getByRole('alert')).toHaveText('The user name or password is wrong.');

  // That was this browser's fifth failure in this file (all from 127.0.0.1): the
  // per-address back-off now asks for one second (Retry-After: 1) before the next try.
  await page.waitForTimeout(1_100);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await expect(page.getByTestId('welcome')).toBeVisible();
  const cookiesBefore = await page.context().cookies();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/sign-in$/);

  // Replaying the old session cookie gets nothing: the session is gone on the server.
  await page.context().addCookies(cookiesBefore);
  await page.goto(at('/'));
  await expect(page).toHaveURL(/\/sign-in$/);
});
