import { Browser, Page } from '@playwright/test';
import { test, expect, open, signIn, NEW_ADMIN_PASSWORD } from './fixtures';

// Rights come from Kubernetes RBAC through the person's roles: a viewer gets no claim
// button and Kubernetes refuses a forged claim; an admin creates a custom role, gives it
// to the viewer, and the viewer may then claim. JavaScript on and off.

test.describe.configure({ mode: 'serial' });

const ROLF_PASSWORD = 'rolf picked this passphrase';

async function person(browser: Browser, baseURL: string | undefined, js: boolean): Promise<Page> {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'en-US' });
  return context.newPage();
}

test('a custom role changes what a viewer may do', async ({ page, browser }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  await open(page, '/sign-in', js);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);

  // A viewer, who signs in and sets a password.
  await page.getByRole('link', { name: 'Users' }).click();
  await page.getByLabel('User name').fill('rolf');
  await page.getByLabel('Roles').fill('viewer');
  await page.getByRole('button', { name: 'Create user' }).click();
  const generated = await page.getByTestId('shown-password').inputValue();
  const rolf = await person(browser, baseURL, js);
  await rolf.goto('/sign-in');
  await signIn(rolf, 'rolf', generated);
  await rolf.getByLabel('Current password').fill(generated);
  await rolf.getByLabel('New password', { exact: true }).fill(ROLF_PASSWORD);
  await rolf.getByLabel('Repeat the new password').fill(ROLF_PASSWORD);
  await rolf.getByRole('button', { name: 'Change password' }).click();
  const pool = rolf.locator('[data-pool="sandbox"]');
  await expect(pool).toContainText('Your roles do not allow claiming here.');

  // A forged claim is refused by Kubernetes, which names the person.
  const forged = await rolf.request.post('/claims', {
    form: { namespace: 'demo', pool: 'sandbox', ttl_seconds: '900' },
    headers: { origin: baseURL },
  });
  expect(forged.status()).toBe(403);
  expect(await forged.text()).toContain('Kubernetes refused');
  expect(await forged.text()).toContain('console:rolf');

  // The admin creates a role that may claim, and gives it to rolf.
  await page.getByRole('link', { name: 'Roles' }).click();
  await page.getByLabel('Name', { exact: true }).fill('claimer');
  await page.getByLabel('create virtualmachineclaims').check();
  await page.getByLabel('list virtualmachineclaims').check();
  await page.getByRole('button', { name: 'Save role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role claimer saved.');
  await expect(page.locator('[data-role="claimer"]')).toContainText('list, create — virtualmachineclaims');
  await page.goto('/users/rolf');
  await page.getByRole('textbox', { name: 'Roles' }).fill('viewer claimer');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await expect(page.getByRole('status')).toHaveText('Changes saved.');

  await rolf.goto('/');
  await expect(pool.getByRole('button', { name: 'Claim a sandbox' })).toBeVisible();
  await rolf.context().close();
});
