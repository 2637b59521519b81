import { test, expect, open, signIn, NEW_ADMIN_PASSWORD } from './fixtures';

// A tab whose session ended elsewhere ("sign out everywhere" in another browser): once
// its live stream ends with the session, the page no longer says who is signed in and
// offers to sign in again, back to where it was. Needs JavaScript (without it, the next
// click or reload lands on the sign-in page anyway).

test('a tab whose session ended elsewhere says so and offers to sign in again', async ({ page, browser }, info) => {
  test.skip(info.project.use.javaScriptEnabled === false, 'needs JavaScript');
  test.setTimeout(60_000);
  await open(page, '/sign-in', true);
  const live = page.waitForResponse((r) => r.url().endsWith('/events/dashboard'));
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await live;
  await expect(page.getByTestId('signed-in-as')).toHaveText('Signed in as admin');

  const elsewhere = await browser.newContext({ baseURL: info.project.use.baseURL, locale: 'en-US' });
  const other = await elsewhere.newPage();
  await other.goto('/sign-in');
  await signIn(other, 'admin', NEW_ADMIN_PASSWORD);
  await other.goto('/account');
  await other.getByRole('button', { name: 'Sign out everywhere' }).click();
  await expect(other).toHaveURL(/\/sign-in/);
  await elsewhere.close();

  // The stream re-checks its session at least every 15 s.
  const ended = page.getByTestId('session-ended');
  await expect(ended).toHaveText('Your session has ended. Sign in again', { timeout: 25_000 });
  await expect(page.getByTestId('signed-in-as')).toHaveCount(0);
  await ended.getByRole('link', { name: 'Sign in again' }).click();
  await expect(page).toHaveURL(/\/sign-in\?next=%2F$/);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await expect(page.getByTestId('welcome')).toBeVisible();
  await expect(page.getByTestId('signed-in-as')).toHaveText('Signed in as admin');
});
