import { Browser, Page } from '@playwright/test';
import { test, expect, makePerson, signIn, signInAsAdmin } from './fixtures';

// Rights come from Kubernetes RBAC through the person's roles: a viewer gets no claim
// button and Kubernetes refuses a forged claim; an admin creates a custom role, gives it
// to the viewer, who may then claim; the admin changes the role and deletes it, and the
// viewer may claim no more. A refused name is told the rule. JavaScript on and off.

test.describe.configure({ mode: 'serial' });

async function signedIn(browser: Browser, baseURL: string, js: boolean, name: string, password: string): Promise<Page> {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'en-US' });
  const page = await context.newPage();
  await page.goto('/sign-in');
  await signIn(page, name, password);
  await expect(page.getByTestId('welcome')).toBeVisible();
  return page;
}

test('a custom role changes what a viewer may do; edited, then deleted', async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(90_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const viewer = await makePerson(browser, baseURL, initialPassword, 'rolf', ['viewer']);
  await signInAsAdmin(page, initialPassword);

  const rolf = await signedIn(browser, baseURL, js, viewer.name, viewer.password);
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

  // A name that breaks the rule is told the rule, and what was ticked stays.
  await page.getByRole('link', { name: 'Roles' }).click();
  await page.getByLabel('Name', { exact: true }).fill('Claimer');
  await page.getByLabel('create virtualmachineclaims').check();
  await page.getByRole('button', { name: 'Save role' }).click();
  await expect(page.getByRole('alert')).toContainText("a lower-case letter followed by at most 30 lower-case letters, digits or '-'");
  await expect(page.getByLabel('create virtualmachineclaims')).toBeChecked();

  // The admin creates a role that may claim, and gives it to rolf: a checkbox of its own
  // on his page.
  await page.getByLabel('Name', { exact: true }).fill('claimer');
  await page.getByLabel('list virtualmachineclaims').check();
  await page.getByRole('button', { name: 'Save role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role claimer saved.');
  const role = page.locator('[data-role="claimer"]');
  await expect(role).toContainText('list, create — virtualmachineclaims');
  await page.goto('/users/rolf');
  const roles = page.getByRole('group', { name: 'Roles' });
  await expect(roles.getByLabel('viewer', { exact: true })).toBeChecked();
  await roles.getByLabel('claimer', { exact: true }).check();
  await page.getByRole('button', { name: 'Save changes' }).click();
  await expect(page.getByRole('status')).toHaveText('Changes saved.');
  await expect(page.getByRole('group', { name: 'Roles' }).getByLabel('claimer', { exact: true })).toBeChecked();

  await rolf.goto('/');
  await expect(pool.getByRole('button', { name: 'Claim a sandbox' })).toBeVisible();

  // Edited: the form opens on the role as it is, its name fixed; the change shows.
  await page.goto('/roles');
  await role.getByRole('link', { name: 'Edit' }).click();
  await expect(page.getByRole('heading', { name: /claimer/ })).toBeVisible();
  await expect(page.getByLabel('Name', { exact: true })).toHaveValue('claimer');
  await expect(page.getByLabel('create virtualmachineclaims')).toBeChecked();
  await page.getByLabel('get virtualmachines', { exact: true }).check();
  await page.getByRole('button', { name: 'Save role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role claimer saved.');
  await expect(role).toContainText('get — virtualmachines');
  await expect(role).toContainText('list, create — virtualmachineclaims');

  // Deleted: gone from the list and from rolf, who may claim no more.
  await role.getByText('Delete…').click();
  await role.getByRole('button', { name: 'Delete this role' }).click();
  await expect(page.getByRole('status')).toHaveText('Role claimer deleted.');
  await expect(page.locator('[data-role="claimer"]')).toHaveCount(0);
  await rolf.goto('/');
  await expect(pool).toContainText('Your roles do not allow claiming here.');
  await page.goto('/users/rolf');
  await expect(page.getByRole('group', { name: 'Roles' }).getByLabel('claimer', { exact: true })).toHaveCount(0);
  await rolf.context().close();
});
