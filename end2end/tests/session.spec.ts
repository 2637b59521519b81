import { Browser, Page } from '@playwright/test';
import { test, expect, makePerson, open, signIn, signInAsAdmin, Person } from './fixtures';

// A tab whose session ended elsewhere — "sign out everywhere" in another browser, or an
// admin who disables the person or resets their password: once its live stream ends with
// the session, the page no longer says who is signed in, its countdown stops, and it
// offers to sign in again, back to where it was. Needs JavaScript (without it, the next
// click or reload lands on the sign-in page anyway). Each case has a person of its own.

test.describe.configure({ mode: 'serial' });

/** `who` signed in on a dashboard that follows the cluster live. */
async function liveDashboard(browser: Browser, baseURL: string, who: Person): Promise<Page> {
  const context = await browser.newContext({ baseURL, locale: 'en-US' });
  const page = await context.newPage();
  await open(page, '/sign-in', true);
  const live = page.waitForResponse((r) => r.url().endsWith('/events/dashboard'));
  await signIn(page, who.name, who.password);
  await live;
  await expect(page.getByTestId('signed-in-as')).toHaveText(`Signed in as ${who.name}`);
  return page;
}

/** Waits until the page says its session ended (the stream re-checks its session at least
 *  every 15 s), with no one signed in left in the header. */
async function sessionEnded(page: Page): Promise<void> {
  const ended = page.getByTestId('session-ended');
  await expect(ended).toHaveText('Your session has ended. Sign in again', { timeout: 25_000 });
  await expect(page.getByTestId('signed-in-as')).toHaveCount(0);
  await expect(ended.getByRole('link', { name: 'Sign in again' })).toHaveAttribute('href', '/sign-in?next=%2F');
}

test('signed out everywhere from another browser: the tab says so, its countdown stops', async ({ browser, initialPassword }, info) => {
  test.skip(info.project.use.javaScriptEnabled === false, 'needs JavaScript');
  test.setTimeout(90_000);
  const baseURL = info.project.use.baseURL!;
  const who = await makePerson(browser, baseURL, initialPassword, 'sam-session', ['developer']);
  const page = await liveDashboard(browser, baseURL, who);
  const pool = page.locator('[data-pool="sandbox"]');
  await pool.getByLabel('Lifetime').selectOption('900');
  await pool.getByRole('button', { name: 'Claim a sandbox' }).click();
  const claim = page.getByTestId('claim').first();
  await expect(claim).toHaveAttribute('data-phase', 'Bound', { timeout: 20_000 });
  const countdown = claim.getByTestId('countdown');
  const ticking = await countdown.textContent();
  await expect(countdown).not.toHaveText(ticking!, { timeout: 3_000 });

  const elsewhere = await browser.newContext({ baseURL, locale: 'en-US' });
  const other = await elsewhere.newPage();
  await other.goto('/sign-in');
  await signIn(other, who.name, who.password);
  await other.goto('/account');
  await other.getByRole('button', { name: 'Sign out everywhere' }).click();
  await expect(other).toHaveURL(/\/sign-in/);
  await elsewhere.close();

  await sessionEnded(page);
  // The clock stands still: nothing on this page is followed any more.
  const stopped = await countdown.textContent();
  await page.waitForTimeout(2_500);
  await expect(countdown).toHaveText(stopped!);

  await page.getByTestId('session-ended').getByRole('link', { name: 'Sign in again' }).click();
  await expect(page).toHaveURL(/\/sign-in\?next=%2F$/);
  await signIn(page, who.name, who.password);
  await expect(page.getByTestId('welcome')).toBeVisible();
  await expect(page.getByTestId('signed-in-as')).toHaveText(`Signed in as ${who.name}`);
  // Ticking again, then released.
  const again = await claim.getByTestId('countdown').textContent();
  await expect(claim.getByTestId('countdown')).not.toHaveText(again!, { timeout: 3_000 });
  await claim.getByText('Release…').click();
  await claim.getByRole('button', { name: 'Release', exact: true }).click();
  await expect(page.getByTestId('claim')).toHaveCount(0, { timeout: 20_000 });
  await page.context().close();
});

for (const [action, button] of [
  ['disables them', 'Disable user'],
  ['resets their password', 'Reset password'],
] as const) {
  test(`an admin ${action}: another tab of theirs says its session ended`, async ({ browser, page, initialPassword }, info) => {
    test.skip(info.project.use.javaScriptEnabled === false, 'needs JavaScript');
    test.setTimeout(60_000);
    const baseURL = info.project.use.baseURL!;
    const name = action.startsWith('disables') ? 'dora-disabled' : 'rita-reset';
    const who = await makePerson(browser, baseURL, initialPassword, name, ['viewer']);
    const tab = await liveDashboard(browser, baseURL, who);

    await signInAsAdmin(page, initialPassword);
    await page.goto(`/users/${name}`);
    if (button === 'Reset password') await page.getByText('Reset password…').click();
    await page.getByRole('button', { name: button, exact: true }).click();
    await expect(page.getByRole('status')).toBeVisible();

    await sessionEnded(tab);
    await tab.context().close();
  });
}
