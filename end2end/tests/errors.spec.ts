import { Browser, BrowserContext, Page } from '@playwright/test';
import { test, expect, makePerson, open, signIn, Person } from './fixtures';

// Each error is the console's own page, styled, in the person's language and theme, with
// a link onward: 401 (a form posted after the session ended: sign in), 403 (a page the
// person's roles do not reach), 404 (no such page), 405 (an address that only takes a
// form), 400 (a form that cannot be read, shown on its page after post/redirect/get).
// JavaScript on and off; in Japanese, in the dark theme the person chose, and at phone
// width once each.

test.describe.configure({ mode: 'serial' });

let developer: Person;

async function signedIn(browser: Browser, baseURL: string, js: boolean, options: Parameters<Browser['newContext']>[0] = {}): Promise<[BrowserContext, Page]> {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'en-US', ...options });
  const page = await context.newPage();
  await open(page, '/sign-in', js);
  await signIn(page, developer.name, developer.password);
  await expect(page.getByTestId('welcome')).toBeVisible();
  return [context, page];
}

/** The page is the console's: its stylesheet applied (not a browser's bare page). */
async function styled(page: Page): Promise<void> {
  await expect(page.locator('link[rel="stylesheet"]')).toHaveAttribute('href', /^\/pkg\/banlieue-console\./);
  const font = await page.locator('body').evaluate((body) => getComputedStyle(body).fontFamily);
  expect(font).not.toMatch(/^"?Times/);
}

test('a developer of this file', async ({ browser, initialPassword }, info) => {
  test.setTimeout(60_000);
  developer = await makePerson(browser, info.project.use.baseURL!, initialPassword, 'erin-errors', ['developer']);
});

test('401, 403, 404, 405 and 400 are the console\'s pages with a link onward', async ({ browser }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const [context, page] = await signedIn(browser, info.project.use.baseURL!, js);

  // 403: the Roles page is for admins.
  let answer = await page.goto('/roles');
  expect(answer!.status()).toBe(403);
  await styled(page);
  await expect(page.getByRole('alert')).toHaveText('You do not have the right to do this.');
  await page.getByRole('link', { name: 'Go to the dashboard' }).click();
  await expect(page.getByTestId('welcome')).toBeVisible();

  // 404: no page here.
  answer = await page.goto('/no-such-page');
  expect(answer!.status()).toBe(404);
  await styled(page);
  await expect(page.getByRole('heading', { name: 'Page not found' })).toBeVisible();
  await page.getByRole('link', { name: 'Go to the dashboard' }).click();
  await expect(page.getByTestId('welcome')).toBeVisible();

  // 405: sign-out takes a form post only (a reload of its answer, a typed address).
  answer = await page.goto('/sign-out');
  expect(answer!.status()).toBe(405);
  await styled(page);
  await expect(page.getByRole('alert')).toHaveText(/^This address only takes a form submission/);
  await page.getByRole('link', { name: 'Go to the dashboard' }).click();
  await expect(page.getByTestId('welcome')).toBeVisible();

  // 400: a claim form whose body is not UTF-8 (as no browser sends it: rewritten on its way).
  await open(page, '/', js);
  await page.route('**/claims', (route) =>
    route.request().method() === 'POST' ? route.continue({ postData: Buffer.from('namespace=%FF&pool=sandbox') }) : route.continue(),
  );
  // Post/redirect/get: the refusal is shown once on the dashboard it came from.
  const posted = page.waitForResponse((r) => r.url().endsWith('/claims') && r.request().method() === 'POST');
  const shown = page.waitForResponse((r) => new URL(r.url()).pathname === '/' && r.request().method() === 'GET');
  await page.locator('[data-pool="sandbox"]').getByRole('button', { name: 'Claim a sandbox' }).click();
  expect((await posted).status()).toBe(303);
  expect((await shown).status()).toBe(400);
  await expect(page.getByRole('alert')).toHaveText('The form could not be read. Reload the page and try again.');
  await styled(page);
  await expect(page.getByRole('banner').getByRole('link', { name: 'Dashboard' })).toBeVisible();
  await page.unroute('**/claims');
  await expect(page.getByTestId('claim')).toHaveCount(0);

  // 401: a form posted after the session ended (here: the cookie gone) says to sign in,
  // and the link does.
  await open(page, '/account', js);
  await context.clearCookies();
  const refused = page.waitForResponse((r) => r.url().endsWith('/revoke-all'));
  await page.getByRole('button', { name: 'Sign out everywhere' }).click();
  expect((await refused).status()).toBe(401);
  await styled(page);
  await expect(page.getByRole('alert')).toHaveText('Sign in to continue.');
  await page.getByRole('link', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/sign-in/);
  await context.close();
});

test('in Japanese, dark by choice, on a phone', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  // The system prefers light; the person chose dark.
  const [context, page] = await signedIn(browser, baseURL, js, { colorScheme: 'light', viewport: { width: 390, height: 844 } });
  await context.addCookies([
    { name: 'banlieue-lang', value: 'ja', url: baseURL },
    { name: 'banlieue-theme', value: 'dark', url: baseURL },
  ]);
  const background = () =>
    page.locator('body').evaluate((body) => Number(/^lab\(([\d.]+)/.exec(getComputedStyle(body).backgroundColor)?.[1]));
  for (const [path, status, message] of [
    ['/roles', 403, 'この操作を行う権限がありません。'],
    ['/sign-out', 405, 'このアドレスはフォームの送信専用です。前のページに戻ってボタンを使ってください。'],
  ] as const) {
    const answer = await page.goto(path);
    expect(answer!.status()).toBe(status);
    await expect(page.locator('html')).toHaveAttribute('lang', 'ja');
    await expect(page.locator('html')).toHaveClass('dark');
    await expect(page.getByRole('alert')).toHaveText(message);
    expect(await background(), `${path}: dark although the system is light`).toBeLessThan(10);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await expect(page.getByRole('link', { name: 'ダッシュボードへ' })).toBeVisible();
  }
  const answer = await page.goto('/no-such-page');
  expect(answer!.status()).toBe(404);
  await expect(page.getByRole('heading', { name: 'ページが見つかりません' })).toBeVisible();
  expect(await background()).toBeLessThan(10);
  await context.close();
});
