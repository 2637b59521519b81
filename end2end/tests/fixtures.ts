import { test as base, expect, Page } from '@playwright/test';
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
    const wasm = page.waitForResponse((r) => r.url().endsWith('.wasm') && r.ok());
    await page.goto(path);
    await wasm;
    await page.waitForLoadState('networkidle');
  } else {
    await page.goto(path);
  }
}

export async function signIn(page: Page, name: string, password: string): Promise<void> {
  await page.getByLabel('User name').fill(name);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
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
  const wrong = page.getByText('The user name or password is wrong.');
  await page.goto('/sign-in');
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await expect(page.getByTestId('welcome').or(wrong)).toBeVisible();
  if (await page.getByTestId('welcome').isVisible()) return;
  await signIn(page, 'admin', initialPassword);
  await page.getByLabel('Current password').fill(initialPassword);
  await page.getByLabel('New password', { exact: true }).fill(NEW_ADMIN_PASSWORD);
  await page.getByLabel('Repeat the new password').fill(NEW_ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Change password' }).click();
  await expect(page.getByTestId('welcome')).toBeVisible();
}
