import { Browser, Page } from '@playwright/test';
import { test, expect, makePerson, open, signIn, signedInPage, Person, ENGLISH_SIGN_IN, JAPANESE_SIGN_IN } from './fixtures';

// Pools (operators): create one, change it, delete it; a form Kubernetes or the console
// refuses keeps what was typed; a developer sees the pools but no form, and Kubernetes
// refuses the save they forge. In English and Japanese, once at phone width. JavaScript
// on and off. The file makes its own operator and developer, and its own pool.

test.describe.configure({ mode: 'serial' });

let operator: Person;
let developer: Person;

/** Fills the pool form: `fields` by label, the rest as they are. */
async function fillPool(page: Page, fields: Record<string, string>): Promise<void> {
  for (const [label, value] of Object.entries(fields)) await page.getByLabel(label, { exact: true }).fill(value);
}

test('the people of this file', async ({ browser, initialPassword }, info) => {
  test.setTimeout(90_000);
  const baseURL = info.project.use.baseURL!;
  operator = await makePerson(browser, baseURL, initialPassword, 'olga-pools', ['operator']);
  developer = await makePerson(browser, baseURL, initialPassword, 'dev-pools', ['developer']);
});

test('an operator creates a pool, changes it and deletes it', async ({ browser }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const page = await signedInPage(browser, info.project.use.baseURL!, js, operator);
  await page.getByRole('banner').getByRole('link', { name: 'Pools' }).click();
  await expect(page.getByRole('heading', { name: 'Pools', level: 1 })).toBeVisible();
  await expect(page.locator('[data-pool="sandbox"]')).toBeVisible();

  // A maximum below the warm count is refused by the console; nothing typed is lost.
  await fillPool(page, {
    Namespace: 'demo',
    Name: 'trial',
    'Warm (Ready, unclaimed)': '3',
    Maximum: '2',
    'Image revision': 'r1',
    Image: 'registry.example/sandbox:1',
    CPUs: '1',
    'Memory (e.g. 4Gi)': '1Gi',
  });
  // A choice of the providers that exist, the dev cluster's simulator first.
  await expect(page.getByLabel('Provider', { exact: true })).toHaveValue('simulated');
  await page.getByRole('button', { name: 'Save pool' }).click();
  await expect(page.getByRole('alert')).toContainText('warm ≤ maximum');
  await expect(page.getByLabel('Name', { exact: true })).toHaveValue('trial');
  await expect(page.getByLabel('Image', { exact: true })).toHaveValue('registry.example/sandbox:1');

  await fillPool(page, { 'Warm (Ready, unclaimed)': '1', Maximum: '2' });
  await page.getByRole('button', { name: 'Save pool' }).click();
  await expect(page.getByRole('status')).toHaveText('Pool trial saved.');
  const trial = page.locator('[data-pool="trial"]');
  await expect(trial).toContainText('warm 1, max 2');

  // Edit opens the form on the pool as it is.
  await trial.getByRole('link', { name: 'Edit' }).click();
  await expect(page.getByLabel('Name', { exact: true })).toHaveValue('trial');
  await expect(page.getByLabel('Maximum', { exact: true })).toHaveValue('2');
  await fillPool(page, { Maximum: '4', 'Image revision': 'r2' });
  await page.getByRole('button', { name: 'Save pool' }).click();
  await expect(page.getByRole('status')).toHaveText('Pool trial saved.');
  await expect(trial).toContainText('warm 1, max 4');
  await expect(trial).toContainText('r2');

  await trial.getByText('Delete…').click();
  await trial.getByRole('button', { name: 'Delete this pool' }).click();
  await expect(page.getByRole('status')).toContainText('Pool trial deleted');
  await expect(page.locator('[data-pool="trial"]')).toHaveCount(0);
  await page.context().close();
});

test('a pool naming no provider says what it waits for', async ({ browser }, info) => {
  test.setTimeout(60_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const page = await signedInPage(browser, baseURL, js, operator);
  const name = js ? 'orphan-js' : 'orphan';
  // The form offers only providers that exist; a typo made elsewhere (kubectl, an old
  // form) is what this shows.
  const saved = await page.request.post('/pools', {
    form: {
      namespace: 'demo',
      name,
      warm_replicas: '1',
      max_replicas: '1',
      image_revision: 'r1',
      image: 'registry.example/sandbox:1',
      cpu: '1',
      memory: '1Gi',
      provider: 'no-such-provider',
    },
    headers: { origin: baseURL },
    maxRedirects: 0,
  });
  expect(saved.status()).toBe(303);
  // The pool controller reports it within a pass; the page shows it on a reload.
  await expect(async () => {
    await page.goto('/pools');
    await expect(page.locator(`[data-pool="${name}"]`).getByTestId('pool-stalled')).toHaveText(
      'Waiting for provider “no-such-provider”: no VirtualMachineProvider has that name. Install it, or choose one that exists.',
      { timeout: 1_000 },
    );
  }).toPass({ timeout: 20_000 });
  // Editing it shows the name it has, marked, beside the providers that exist.
  await page.locator(`[data-pool="${name}"]`).getByRole('link', { name: 'Edit' }).click();
  await expect(page.getByLabel('Provider', { exact: true })).toHaveValue('no-such-provider');
  await expect(page.getByLabel('Provider', { exact: true }).locator('option:checked')).toHaveText(
    'no-such-provider (no such provider)',
  );
  const deleted = await page.request.post(`/pools/demo/${name}/delete`, { headers: { origin: baseURL }, maxRedirects: 0 });
  expect(deleted.status()).toBe(303);
  await page.context().close();
});

test('a developer sees the pools but no form; Kubernetes refuses a forged save', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const page = await signedInPage(browser, baseURL, js, developer);
  // The header offers Pools: Kubernetes lets developers list them.
  await page.getByRole('banner').getByRole('link', { name: 'Pools' }).click();
  await expect(page.getByTestId('pools-read-only')).toBeVisible();
  await expect(page.locator('[data-pool="sandbox"]')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Save pool' })).toHaveCount(0);
  await expect(page.getByRole('link', { name: 'Edit' })).toHaveCount(0);

  // The same form, forged: Kubernetes refuses it as the developer, on the console's page.
  const forged = await page.request.post('/pools', {
    form: {
      namespace: 'demo',
      name: 'forged',
      warm_replicas: '1',
      max_replicas: '1',
      image_revision: 'r1',
      image: 'registry.example/sandbox:1',
      cpu: '1',
      memory: '1Gi',
      provider: 'simulated',
    },
    headers: { origin: baseURL },
  });
  expect(forged.status()).toBe(403);
  const text = await forged.text();
  expect(text).toContain('Kubernetes refused');
  expect(text).toContain('console:dev-pools');
  const deleted = await page.request.post('/pools/demo/sandbox/delete', { headers: { origin: baseURL } });
  expect(deleted.status()).toBe(403);
  await page.reload();
  await expect(page.locator('[data-pool="sandbox"]')).toBeVisible();
  await page.context().close();
});

test('the pools in Japanese, on a phone', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const page = await signedInPage(browser, info.project.use.baseURL!, js, operator, 'ja-JP', 390);
  await page.goto('/pools');
  await expect(page.getByRole('heading', { name: 'プール', level: 1 })).toBeVisible();
  await expect(page.locator('[data-pool="sandbox"]')).toContainText('ウォーム 3、上限 10');
  await expect(page.getByRole('button', { name: 'プールを保存' })).toBeVisible();
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(width).toBeLessThanOrEqual(390);
  // A refused change in Japanese: the form keeps it, the pool stays as it was.
  await page.locator('[data-pool="sandbox"]').getByRole('link', { name: '編集' }).click();
  await expect(page.getByLabel('名前', { exact: true })).toHaveValue('sandbox');
  await page.getByLabel('上限', { exact: true }).fill('0');
  await page.getByRole('button', { name: 'プールを保存' }).click();
  await expect(page.getByRole('alert')).toBeVisible();
  await expect(page.getByLabel('上限', { exact: true })).toHaveValue('0');
  await expect(page.locator('[data-pool="sandbox"]')).toContainText('ウォーム 3、上限 10');
  await page.context().close();
});
