import { Browser, Page } from '@playwright/test';
import { test, expect, changePassword, makePerson, open, signIn, signInAsAdmin } from './fixtures';

// User administration: create a user with a generated password (roles ticked among the
// roles that exist), reset it after a confirmation step, delete a user after typing the
// name, the last-admin guard (in Japanese), and the audit log that recorded all of it,
// with its filters matching any part. JavaScript on and off. The file makes its own
// people; the first admin's password is whatever the suite set (fixtures.ts).

test.describe.configure({ mode: 'serial' });

const ALICE_PASSWORD = 'alice chose this passphrase';

async function person(browser: Browser, baseURL: string | undefined, javaScriptEnabled: boolean | undefined): Promise<Page> {
  const context = await browser.newContext({ baseURL, javaScriptEnabled, locale: 'en-US' });
  return context.newPage();
}

async function adminPage(page: Page, js: boolean, initialPassword: string): Promise<void> {
  await signInAsAdmin(page, initialPassword);
  if (js) await open(page, '/', js);
}

test('an admin creates a user who must change the generated password', async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  await adminPage(page, js, initialPassword);
  await page.getByRole('link', { name: 'Users' }).click();
  await expect(page.getByRole('heading', { name: 'Users' })).toBeVisible();
  // No tenant is configured: the table has no always-empty Tenant column.
  await expect(page.getByTestId('users-table').getByRole('columnheader', { name: 'Tenant' })).toHaveCount(0);
  await page.getByLabel('User name').fill('alice');
  await page.getByLabel('Display name').fill('Alice Liddell');
  await page.getByLabel('E-mail').fill('alice@example.test');
  // The roles that exist, as checkboxes: no names to type (and mistype).
  const roles = page.getByRole('group', { name: 'Roles' });
  for (const role of ['viewer', 'developer', 'operator', 'admin']) {
    await expect(roles.getByRole('checkbox', { name: role, exact: true })).not.toBeChecked();
  }
  await roles.getByLabel('developer', { exact: true }).check();
  await roles.getByLabel('viewer', { exact: true }).check();
  await page.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByRole('status')).toHaveText('User created.');
  const generated = await page.getByTestId('shown-password').inputValue();
  expect(generated).toMatch(/^[A-Za-z0-9]{24}$/);
  await expect(page.getByRole('group', { name: 'Roles' }).getByLabel('developer', { exact: true })).toBeChecked();

  const alice = await person(browser, info.project.use.baseURL, info.project.use.javaScriptEnabled);
  await alice.goto('/sign-in');
  await signIn(alice, 'alice', generated);
  await expect(alice).toHaveURL(/\/change-password$/);
  await expect(alice.getByTestId('must-change')).not.toContainText('administrator');
  await changePassword(alice, generated, ALICE_PASSWORD);
  await expect(alice.getByTestId('welcome')).toHaveText('Welcome, Alice Liddell.');
  await alice.context().close();

  await page.goto('/users?q=alice');
  await expect(page.getByTestId('users-table')).toContainText('developer, viewer');
});

test("resetting a password asks first, then ends the user's open session", async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const alice = await person(browser, info.project.use.baseURL, info.project.use.javaScriptEnabled);
  await alice.goto('/sign-in');
  await signIn(alice, 'alice', ALICE_PASSWORD);
  await expect(alice.getByTestId('welcome')).toBeVisible();

  await adminPage(page, js, initialPassword);
  await page.goto('/users/alice');
  // One click does not reset: it opens the step that says what the reset does.
  const reset = page.getByRole('button', { name: 'Reset password', exact: true });
  await expect(reset).toBeHidden();
  await page.getByText('Reset password…').click();
  await expect(page.getByTestId('reset-password')).toContainText("alice's sessions end at once");
  await reset.click();
  await expect(page.getByRole('status')).toContainText('Password reset.');
  await expect(page.getByTestId('shown-password')).toHaveValue(/^[A-Za-z0-9]{24}$/);

  await alice.goto('/');
  await expect(alice).toHaveURL(/\/sign-in$/);
  await alice.context().close();
});

test('an admin deletes a user after typing the name', async ({ page, initialPassword }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await adminPage(page, js, initialPassword);
  await page.goto('/users');
  await page.getByLabel('User name').fill('doomed');
  await page.getByRole('group', { name: 'Roles' }).getByLabel('viewer', { exact: true }).check();
  await page.getByRole('button', { name: 'Create user' }).click();
  await expect(page.getByRole('status')).toHaveText('User created.');

  const confirm = page.getByLabel('User name to confirm');
  await confirm.fill('doome');
  await page.getByRole('button', { name: 'Delete user' }).click();
  await expect(page.getByRole('alert')).toHaveText("Type the user's name exactly to confirm.");
  await expect(page).toHaveURL(/\/users\/doomed/);

  await page.getByLabel('User name to confirm').fill('doomed');
  await page.getByRole('button', { name: 'Delete user' }).click();
  // (Once hydrated, the page takes the notice out of its address.)
  await expect(page).toHaveURL(/\/users(\?deleted=doomed)?$/);
  await expect(page.getByRole('status')).toHaveText('User doomed deleted.');
  await page.goto('/users?q=doomed');
  await expect(page.getByText('No user matches.')).toBeVisible();
  expect((await page.request.get('/users/doomed')).status()).toBe(404);
});

test("disabling ends a user's sessions, enabling lets them back in, and 'End all sessions' signs them out", async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(90_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const ulla = await makePerson(browser, info.project.use.baseURL!, initialPassword, 'ulla-users', ['viewer']);
  const theirs = await person(browser, info.project.use.baseURL, info.project.use.javaScriptEnabled);
  const signsIn = async () => {
    await theirs.goto('/sign-in');
    await signIn(theirs, ulla.name, ulla.password);
    await expect(theirs.getByTestId('welcome')).toBeVisible();
  };
  const isSignedOut = async () => {
    await theirs.goto('/');
    await expect(theirs).toHaveURL(/\/sign-in$/);
  };
  await signsIn();
  await adminPage(page, js, initialPassword);
  await open(page, `/users/${ulla.name}`, js);

  await page.getByRole('button', { name: 'Disable user' }).click();
  await expect(page.getByRole('status')).toHaveText('User disabled; their sessions have ended.');
  await isSignedOut();
  await signIn(theirs, ulla.name, ulla.password);
  await expect(theirs.getByRole('alert')).toBeVisible();
  await expect(theirs.getByTestId('welcome')).toHaveCount(0);

  await page.getByRole('button', { name: 'Enable user' }).click();
  await expect(page.getByRole('status')).toHaveText('User enabled.');
  await signsIn();

  await page.getByRole('button', { name: 'End all sessions' }).click();
  await expect(page.getByRole('status')).toHaveText('All sessions of this user have ended.');
  await isSignedOut();
  await signsIn();
  await theirs.context().close();
});

test('two admins change one user: the later save is refused and shows the earlier one', async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  await makePerson(browser, info.project.use.baseURL!, initialPassword, 'cora-conflict', ['viewer'], { firstSignIn: false });
  await adminPage(page, js, initialPassword);
  const other = await person(browser, info.project.use.baseURL, info.project.use.javaScriptEnabled);
  await signInAsAdmin(other, initialPassword);
  // Both open the form; one saves first.
  await open(page, '/users/cora-conflict', js);
  await open(other, '/users/cora-conflict', js);
  await other.getByLabel('Display name').fill('Cora First');
  await other.getByRole('button', { name: 'Save changes' }).click();
  await expect(other.getByRole('status')).toHaveText('Changes saved.');
  const shown = page.waitForResponse((r) => r.url().endsWith('/users/cora-conflict') && r.request().method() === 'GET');
  await page.getByLabel('Display name').fill('Cora Second');
  await page.getByRole('button', { name: 'Save changes' }).click();
  expect((await shown).status()).toBe(409);
  await expect(page.getByRole('alert')).toHaveText(
    'Someone else changed this user meanwhile. The page now shows their version; make your change again.',
  );
  await expect(page.getByLabel('Display name')).toHaveValue('Cora First');
  await expect(page).toHaveURL(/\/users\/cora-conflict$/);
  await other.context().close();
});

test('the user list pages through a search, and a page past the end is the last', async ({ page, initialPassword }, info) => {
  test.setTimeout(120_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  await adminPage(page, js, initialPassword);
  // One more than a page (50) of people whose names share a part, made by form posts.
  for (let i = 0; i < 51; i++) {
    const made = await page.request.post('/users', {
      headers: { origin: baseURL },
      form: { name: `pager-${String(i).padStart(2, '0')}`, roles: 'viewer', password_mode: 'generate' },
      maxRedirects: 0,
    });
    expect(made.status()).toBe(303);
  }
  const table = page.getByTestId('users-table');
  await page.goto('/users?q=pager-');
  await expect(page.getByText('Page 1 of 2')).toBeVisible();
  await expect(table.locator('tbody tr')).toHaveCount(50);
  await page.getByRole('link', { name: 'Next' }).click();
  await expect(page.getByText('Page 2 of 2')).toBeVisible();
  await expect(table.locator('tbody tr')).toHaveCount(1);
  await expect(page.getByRole('link', { name: 'Next' })).toHaveCount(0);
  await page.getByRole('link', { name: 'Previous' }).click();
  await expect(page.getByText('Page 1 of 2')).toBeVisible();
  await page.goto('/users?q=pager-&page=99999');
  await expect(page.getByText('Page 2 of 2')).toBeVisible();
  await expect(table.locator('tbody tr')).toHaveCount(1);
});

test('the last admin cannot be disabled (in Japanese)', async ({ page, initialPassword }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await adminPage(page, js, initialPassword);
  await page.goto('/users/admin');
  await page.getByRole('button', { name: '日本語' }).click();
  await expect(page.getByRole('heading', { name: 'プロフィールとロール' })).toBeVisible();
  await page.getByRole('button', { name: 'ユーザーを無効にする' }).click();
  await expect(page.getByRole('alert')).toHaveText(
    '最後の有効な管理者は、無効化・削除・admin ロールの削除ができません。',
  );
  // Post/redirect/get: the refusal is shown on the user's page, so a reload repeats nothing.
  await expect(page).toHaveURL(/\/users\/admin$/);
  await page.reload();
  await expect(page.getByRole('alert')).toHaveCount(0);
  await page.getByRole('button', { name: 'English' }).click();
});

test('the audit log shows each of these; its filters match any part', async ({ page, initialPassword }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await adminPage(page, js, initialPassword);
  await page.getByRole('link', { name: 'Audit log' }).click();
  const table = page.getByTestId('audit-table');
  for (const action of ['user.create', 'user.password-change', 'user.password-set', 'user.delete', 'user.disable']) {
    await expect(table).toContainText(action);
  }
  const rows = table.locator('tbody tr');
  const filter = async (fields: Partial<Record<'Actor' | 'Action' | 'Target' | 'Result', string>>) => {
    for (const label of ['Actor', 'Action', 'Target', 'Result'] as const) {
      await page.getByLabel(label, { exact: true }).fill(fields[label] ?? '');
    }
    await page.getByRole('button', { name: 'Filter' }).click();
  };

  // (Other files disable people of their own: the target narrows it to this file's.)
  await filter({ Action: 'user.disable', Target: 'admin' });
  await expect(rows).toHaveCount(1);
  await expect(table).toContainText('last-admin');
  const row = rows.first();
  await expect(row.getByTestId('audit-action')).toHaveText('user.disable');
  await expect(row).toContainText('User disabled');
  await expect(row).toContainText('Last admin');

  // Any part, ignoring case: "session" finds sign-ins and sign-outs; "DOOM" the deleted
  // user's rows; an actor's prefix, that actor's.
  await filter({ Action: 'user.disable', Target: 'admin', Result: 'LAST' });
  await expect(rows).toHaveCount(1);
  await filter({ Action: 'session' });
  await expect(rows.first()).toBeVisible();
  for (const code of await rows.getByTestId('audit-action').allTextContents()) expect(code).toContain('session');
  await filter({ Target: 'DOOM' });
  await expect(rows).toHaveCount(2);
  for (const code of await rows.getByTestId('audit-action').allTextContents()) expect(['user.create', 'user.delete']).toContain(code);
  await filter({ Actor: 'ali', Action: 'password' });
  await expect(rows).toHaveCount(1);
  await expect(rows.first().getByTestId('audit-action')).toHaveText('user.password-change');
  await filter({ Action: 'no-such-action' });
  await expect(page.getByText('No event matches.')).toBeVisible();

  // In Japanese the codes are in words, each with its code beside it (what the filters
  // match), the filter kept.
  await filter({ Action: 'user.disable', Target: 'admin' });
  await page.getByRole('button', { name: '日本語' }).click();
  await expect(page.getByRole('heading', { name: '監査ログ' })).toBeVisible();
  await expect(rows).toHaveCount(1);
  await expect(row).toContainText('ユーザーの無効化');
  await expect(row.getByTestId('audit-action')).toHaveText('user.disable');
  await expect(row).toContainText('最後の管理者');
  await expect(row.getByTestId('audit-result')).toHaveText('last-admin');
  await page.getByRole('button', { name: 'English' }).click();
});
