import { test as base, expect, Browser, Page } from '@playwright/test';
import { passwordVariable } from '../servers';

/** A new password every project run sets for the first admin. */
export const NEW_ADMIN_PASSWORD = 'a long and memorable passphrase';

type Fixtures = {
  /** The first admin's generated password of this project's console. */
  initialPassword: string;
  /** Fails the test on any page error or console error (CSP violations, hydration),
   *  except Chromium's note that a refused action answered with a 4xx status. */
  cleanConsole: void;
};

export const test = base.extend<Fixtures>({
  initialPassword: async ({}, use, testInfo) => {
    const password = process.env[passwordVariable(testInfo.project.name)];
    if (!password) throw new Error('global setup did not provide the admin password');
    await use(password);
  },
  cleanConsole: [
    async ({ page }, use) => {
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
      page.on('console', (message) => {
        // A refused action answers 4xx on purpose; Chromium logs every such document.
        const expectedStatus = message.text().startsWith('Failed to load resource: the server responded with a status of 4');
        if (message.type() === 'error' && !expectedStatus) problems.push(`console: ${message.text()}`);
      });
      await use();
      expect(problems).toEqual([]);
    },
    { auto: true },
  ],
});

export { expect };

/** Waits for hydration when JavaScript is on, so clicks hit live handlers. */
export async function open(page: Page, path: string, javaScript: boolean): Promise<void> {
  if (javaScript) {
    await page.goto(path);
    // The page's wasm, fetched or taken from the browser's cache: resource timing lists
    // both (a response event can be missed for a cached file, and then waits forever).
    await page.waitForFunction(
      () => performance.getEntriesByType('resource').some((entry) => entry.name.endsWith('.wasm')),
      undefined,
      { timeout: 20_000 },
    );
    await page.waitForLoadState('networkidle');
  } else {
    await page.goto(path);
  }
}

/** The sign-in card's words in one language. */
export interface SignInWords {
  userName: string;
  password: string;
  signIn: string;
}

export const ENGLISH_SIGN_IN: SignInWords = { userName: 'User name', password: 'Password', signIn: 'Sign in' };
export const JAPANESE_SIGN_IN: SignInWords = { userName: 'ユーザー名', password: 'パスワード', signIn: 'サインイン' };

/** Fills the sign-in card and submits it. The console checks one sign-in per address at
 *  a time and answers another arriving meanwhile 429 (README, "Sign-in under attack"):
 *  spec files running side by side from 127.0.0.1 meet that, so such an answer is tried
 *  again after its Retry-After second (a few times). Any other answer is the caller's. */
export async function signIn(page: Page, name: string, password: string, words = ENGLISH_SIGN_IN): Promise<void> {
  await postedPatiently(page, async () => {
    await page.getByLabel(words.userName).fill(name);
    await page.getByLabel(words.password, { exact: true }).fill(password);
    await page.getByRole('button', { name: words.signIn }).click();
  });
}

/** Fills the password change (English) and submits it, as patiently as [`signIn`]: a
 *  password change is checked one per address at a time too. */
export async function changePassword(page: Page, current: string, next: string): Promise<void> {
  await postedPatiently(page, async () => {
    await page.getByLabel('Current password').fill(current);
    await page.getByLabel('New password', { exact: true }).fill(next);
    await page.getByLabel('Repeat the new password').fill(next);
    await page.getByRole('button', { name: 'Change password' }).click();
  });
}

/** Runs `submit` (which fills and posts a form) again while the answer is 429, after its
 *  Retry-After second, at most five times. */
async function postedPatiently(page: Page, submit: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const answer = page.waitForResponse((r) => r.request().method() === 'POST' && r.request().isNavigationRequest());
    await submit();
    const status = (await answer).status();
    if (status !== 429 || attempt === 5) return;
    await page.waitForLoadState();
    await page.waitForTimeout(1_100);
  }
}

/** With JavaScript: waits for the live page. Without: reloads until it shows (claim and
 *  release redirect to the dashboard, so a reload never posts again). */
export async function until(
  page: Page,
  js: boolean,
  check: (timeout: number) => Promise<void>,
  within = 20_000,
): Promise<void> {
  if (js) {
    await check(within);
    return;
  }
  await expect(async () => {
    await page.reload();
    await check(1_000);
  }).toPass({ timeout: within });
}

/** Signs the first admin in whether or not an earlier spec file changed the password: with
 *  NEW_ADMIN_PASSWORD if it works, else with the initial one, changing it then. Ends on
 *  the dashboard. Lets a spec file run alone. */
export async function signInAsAdmin(page: Page, initialPassword: string): Promise<void> {
  const welcome = page.getByTestId('welcome');
  const wrong = page.getByText('The user name or password is wrong.');
  const mustChange = page.getByTestId('must-change');
  // Spec files running side by side may both find the initial password still set: the
  // one that changes it second is refused, and tries the new one again.
  for (let attempt = 0; attempt < 3; attempt++) {
    await page.goto('/sign-in');
    await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
    await expect(welcome.or(wrong)).toBeVisible();
    if (await welcome.isVisible()) return;
    await signIn(page, 'admin', initialPassword);
    await expect(mustChange.or(wrong)).toBeVisible();
    if (!(await mustChange.isVisible())) continue;
    await changePassword(page, initialPassword, NEW_ADMIN_PASSWORD);
    await expect(welcome.or(page.getByRole('alert'))).toBeVisible();
    if (await welcome.isVisible()) return;
  }
  throw new Error('the first admin could not sign in with either password');
}

/** A person of a spec file's own, made by the first admin: a file that uses its own
 *  people (not the admin's sandboxes and sessions) runs alone and beside the others. */
export interface Person {
  name: string;
  password: string;
}

/** Makes `name` with `roles` as the first admin (in a browser context of its own,
 *  without JavaScript: the forms need none), with a password the person then changes
 *  at their first sign-in, as every made user must. Returns how they sign in. With
 *  `firstSignIn: false` nobody signs in: the password returned is the admin's, still to
 *  be changed. */
export async function makePerson(
  browser: Browser,
  baseURL: string,
  initialPassword: string,
  name: string,
  roles: string[],
  { firstSignIn = true } = {},
): Promise<Person> {
  const person = { name, password: `${name} has a passphrase of their own` };
  const first = `${name} got this one from the admin`;
  const context = await browser.newContext({ baseURL, javaScriptEnabled: false, locale: 'en-US' });
  const admin = await context.newPage();
  await signInAsAdmin(admin, initialPassword);
  await admin.goto('/users');
  await admin.getByLabel('User name').fill(name);
  const choices = admin.getByRole('group', { name: 'Roles' });
  for (const role of roles) await choices.getByLabel(role, { exact: true }).check();
  await admin.locator('input[name="password_mode"][value="typed"]').check();
  await admin.locator('input[name="password"]').fill(first);
  await admin.getByRole('button', { name: 'Create user' }).click();
  await expect(admin.getByRole('status')).toHaveText('User created.');
  if (!firstSignIn) {
    await context.close();
    return { name, password: first };
  }
  await context.clearCookies();
  await admin.goto('/sign-in');
  await signIn(admin, name, first);
  await changePassword(admin, first, person.password);
  await expect(admin.getByTestId('welcome')).toBeVisible();
  await context.close();
  return person;
}

/** A browser context of its own (JavaScript `js`, `locale`, `width` px wide) signed in as `who`. */
export async function signedInPage(browser: Browser, baseURL: string, js: boolean, who: Person, locale = 'en-US', width = 1280): Promise<Page> {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale, viewport: { width, height: 900 } });
  const page = await context.newPage();
  await open(page, '/sign-in', js);
  await signIn(page, who.name, who.password, locale.startsWith('ja') ? JAPANESE_SIGN_IN : ENGLISH_SIGN_IN);
  await expect(page.getByTestId('welcome')).toBeVisible();
  return page;
}
