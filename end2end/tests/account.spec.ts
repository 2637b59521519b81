import { Browser, Page } from '@playwright/test';
import { test, expect, makePerson, open, signIn, signedInPage, Person, ENGLISH_SIGN_IN, JAPANESE_SIGN_IN } from './fixtures';

// My account: What can I do? (Kubernetes' answers for the person's roles), My sessions
// with End for another browser's session, and Sign out everywhere. JavaScript on and off;
// in Japanese at phone width once. The file's people are its own, so ending sessions
// here ends nobody else's.

test.describe.configure({ mode: 'serial' });

let developer: Person;
let viewer: Person;

test('the people of this file', async ({ browser, initialPassword }, info) => {
  test.setTimeout(90_000);
  const baseURL = info.project.use.baseURL!;
  developer = await makePerson(browser, baseURL, initialPassword, 'dana-account', ['developer']);
  viewer = await makePerson(browser, baseURL, initialPassword, 'vic-account', ['viewer']);
});

test('What can I do? is what Kubernetes allows the roles', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const allowed = (page: Page, resource: string, verb: string) =>
    page.locator(`[data-resource="${resource}"] [data-verb="${verb}"]`);
  for (const [who, mayClaim] of [
    [developer, 'true'],
    [viewer, 'false'],
  ] as const) {
    const page = await signedInPage(browser, baseURL, js, who);
    await page.getByRole('link', { name: 'My account' }).click();
    await expect(page.getByRole('heading', { name: 'What can I do?' })).toBeVisible();
    await expect(allowed(page, 'virtualmachineclaims', 'create')).toHaveAttribute('data-allowed', mayClaim);
    await expect(allowed(page, 'virtualmachineclaims', 'list')).toHaveAttribute('data-allowed', 'true');
    await expect(allowed(page, 'virtualmachinepools', 'create')).toHaveAttribute('data-allowed', 'false');
    // In words for screen readers, not only a mark.
    await expect(allowed(page, 'virtualmachinepools', 'create')).toContainText('not allowed');
    await page.context().close();
  }
});

test('End signs another browser out; this one stays', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const laptop = await signedInPage(browser, baseURL, js, developer);
  const page = await signedInPage(browser, baseURL, js, developer);
  await page.getByRole('link', { name: 'My account' }).click();
  await expect(page.locator('tr[data-current="true"]')).toHaveCount(1);
  // Earlier sessions of this person (makePerson's, the test before) come first: end every
  // other one, one at a time, each answer a page of its own (a reload posts nothing).
  const others = page.locator('tr[data-current="false"]');
  for (let left = await others.count(); left > 0; left--) {
    await others.first().getByRole('button', { name: 'End' }).click();
    await expect(page.getByRole('status')).toHaveText('Session ended.');
    await expect(page).toHaveURL(/\/account/);
    await expect(others).toHaveCount(left - 1);
  }
  await page.reload();
  await expect(page.locator('tr[data-current="true"]')).toHaveCount(1);

  await laptop.goto('/');
  await expect(laptop).toHaveURL(/\/sign-in$/);
  await page.goto('/');
  await expect(page.getByTestId('welcome')).toBeVisible();
  await laptop.context().close();
  await page.context().close();
});

test('Sign out everywhere ends every session, this one too', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const laptop = await signedInPage(browser, baseURL, js, developer);
  const page = await signedInPage(browser, baseURL, js, developer);
  await open(page, '/account', js);
  await page.getByRole('button', { name: 'Sign out everywhere' }).click();
  await expect(page).toHaveURL(/\/sign-in/);
  await laptop.goto('/account');
  await expect(laptop).toHaveURL(/\/sign-in/);
  // The password is unchanged: signing in again works, back to the page asked for.
  await signIn(laptop, developer.name, developer.password);
  await expect(laptop).toHaveURL(/\/account$/);
  await expect(laptop.getByRole('heading', { name: 'My account' })).toBeVisible();
  await laptop.context().close();
  await page.context().close();
});

test('My account in Japanese, on a phone', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const other = await signedInPage(browser, baseURL, js, viewer);
  const page = await signedInPage(browser, baseURL, js, viewer, 'ja-JP', 390);
  await page.goto('/account');
  await expect(page.getByRole('heading', { name: 'セッション' })).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  const others = page.locator('tr[data-current="false"]');
  for (let left = await others.count(); left > 0; left--) {
    await others.first().getByRole('button', { name: '終了' }).click();
    await expect(others).toHaveCount(left - 1);
  }
  await other.goto('/');
  await expect(other).toHaveURL(/\/sign-in$/);
  await other.context().close();
  await page.context().close();
});
