import { Browser, Locator, Page } from '@playwright/test';
import { test, expect, makePerson, open, signIn, until, Person, JAPANESE_SIGN_IN } from './fixtures';

// The self-service journey against each console's dev cluster (the Kubernetes emulator
// with the chart, the controllers and the simulated provider): claim a sandbox, watch it
// become Bound with a countdown and a connect command, release it; an operator's All
// sandboxes. With JavaScript the page follows the cluster live; without it, a reload
// shows the new state. The file's people are its own: an operator, who sees All
// sandboxes too, and a developer.

test.describe.configure({ mode: 'serial' });

let operator: Person;
let developer: Person;

/** Signs the operator in and waits until the dashboard is hydrated: it opens its live
 *  stream while hydrating, and input is handled only after that. */
async function signInLive(page: Page): Promise<void> {
  const live = page.waitForResponse((r) => r.url().endsWith('/events/dashboard'));
  await signIn(page, operator.name, operator.password);
  await live;
}

/** A browser of its own for `who`, signed in. */
async function personPage(browser: Browser, baseURL: string, js: boolean, who: Person, options = {}): Promise<Page> {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'en-US', ...options });
  const page = await context.newPage();
  await open(page, '/sign-in', js);
  await signIn(page, who.name, who.password);
  await expect(page.getByTestId('welcome')).toBeVisible();
  return page;
}

/** Fails when `locator` wraps: one line of text (at most 20 px here) plus its padding and
 *  border stays under 40 px; a second line would pass it. */
async function oneLine(locator: Locator): Promise<void> {
  const box = await locator.boundingBox();
  expect(box, 'visible').not.toBeNull();
  expect(box!.height, `${await locator.textContent()} on one line`).toBeLessThan(40);
}

test('the people of this file', async ({ browser, initialPassword }, info) => {
  test.setTimeout(90_000);
  const baseURL = info.project.use.baseURL!;
  operator = await makePerson(browser, baseURL, initialPassword, 'otto-sandboxes', ['operator']);
  developer = await makePerson(browser, baseURL, initialPassword, 'dev-sandboxes', ['developer']);
});

test('claim a sandbox, see it bound, release it', async ({ page }, info) => {
  test.setTimeout(90_000);
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, '/sign-in', js);
  await signIn(page, operator.name, operator.password);
  await expect(page.getByTestId('welcome')).toBeVisible();
  const pool = page.locator('[data-pool="sandbox"]');
  await expect(async () => {
    await page.reload();
    await expect(pool.getByTestId('pool-counts')).toContainText('3 ready', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });

  await pool.getByLabel('Lifetime').selectOption('900');
  await pool.getByRole('button', { name: 'Claim a sandbox' }).click();
  await expect(page.getByRole('status')).toContainText('created');
  if (js) await page.waitForLoadState('networkidle').catch(() => {});

  const claim = page.getByTestId('claim').first();
  await until(page, js, async (timeout) => {
    await expect(claim).toHaveAttribute('data-phase', 'Bound', { timeout });
  });
  await expect(claim.getByTestId('countdown')).toContainText(/in 1[45] minutes/);
  await expect(claim.getByTestId('connect')).toContainText(/^ssh sandbox@/);

  // Copy: with JavaScript it copies and says so for a moment; without, there is no button
  // that would do nothing (the command can be selected by hand).
  const copy = claim.getByRole('button', { name: 'Copy' });
  if (js) {
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
    // The operator sees the same claim in All sandboxes too, with its own button: only the
    // button pressed says it copied.
    const mine = await claim.getAttribute('data-claim');
    const everyone = page.locator(`[data-testid="any-claim"][data-claim="${mine}"]`);
    await expect(everyone.getByRole('button', { name: 'Copy' })).toBeVisible();
    await copy.click();
    await expect(claim.getByTestId('copy-status')).toHaveText('Copied');
    // Read at once, not waited for: "Copied" goes by itself after about two seconds.
    expect(await everyone.getByTestId('copy-status').textContent()).toBe('');
    const command = await claim.getByTestId('connect').textContent();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(command);
    await expect(claim.getByTestId('copy-status')).toHaveText('', { timeout: 5_000 });
    await everyone.getByRole('button', { name: 'Copy' }).click();
    await expect(everyone.getByTestId('copy-status')).toHaveText('Copied');
    expect(await claim.getByTestId('copy-status').textContent()).toBe('');
  } else {
    await expect(copy).toHaveCount(0);
  }

  // Its own page: the VM, when it was bound, how to connect; released from there.
  const name = (await claim.getAttribute('data-claim'))!;
  await claim.getByRole('link', { name }).click();
  await expect(page).toHaveURL(new RegExp(`/claims/demo/${name}$`));
  await expect(page.getByTestId('claim-name')).toHaveText(name);
  await expect(page.getByTestId('phase')).toHaveText('Bound');
  await expect(page.getByTestId('claim-vm')).toHaveText(/^sandbox-/);
  await expect(page.getByTestId('claim-pool')).toHaveText('demo/sandbox');
  await expect(page.getByTestId('countdown')).toContainText(/in 1[45] minutes/);
  await expect(page.getByTestId('connect')).toContainText(/^ssh sandbox@/);
  // Attestation: the member's EK certificate by fingerprint and issuer, verified against
  // its provider's trust bundle, as a broker would read it.
  const attestation = page.getByTestId('claim-attestation');
  await expect(attestation.getByRole('heading', { name: 'Attestation' })).toBeVisible();
  await expect(attestation.getByTestId('attestation-verdict')).toHaveAttribute('data-verified', 'true');
  await expect(attestation.getByTestId('ek-fingerprint')).toHaveText(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  await expect(attestation.getByTestId('ek-issuer')).toHaveText('CN=banlieue simulated hypervisor EK CA, O=banlieue');
  await expect(attestation.getByTestId('ek-trust')).toContainText("Chains to the provider's trust bundle");
  await page.getByText('Release…').click();
  await page.getByRole('button', { name: 'Release', exact: true }).click();
  await expect(page.getByRole('status')).toContainText('is being released');
  await until(page, js, async (timeout) => {
    await expect(page.getByTestId('claim')).toHaveCount(0, { timeout });
  });
});

test('after claiming: the notice follows the claim, the address forgets it, the lifetime stays', async ({ page }, info) => {
  test.setTimeout(90_000);
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, '/sign-in', js);
  if (js) await signInLive(page);
  else await signIn(page, operator.name, operator.password);
  const pool = page.locator('[data-pool="sandbox"]');
  const lifetime = pool.getByLabel('Lifetime');
  // 900 s is the second choice (BANLIEUE_CLAIM_TTL_CHOICES=8,900): not the default.
  await expect(lifetime).toHaveValue('8');
  await lifetime.selectOption('900');
  await pool.getByRole('button', { name: 'Claim a sandbox' }).click();
  const notice = page.getByRole('status');
  await expect(notice).toContainText(/^Claim \S+ created/);
  await expect(lifetime).toHaveValue('900');
  // With JavaScript the address is the dashboard's own: a reload or a bookmark does not
  // announce the claim again. Without, it keeps ?claimed= (nothing can change it).
  if (js) await expect(page).toHaveURL(/\/$/);
  else await expect(page).toHaveURL(/\/\?claimed=/);

  // Once Bound the notice no longer says it will be, live or after a reload, and the
  // lifetime is still the one chosen (with JavaScript, after live updates rendered the
  // form anew).
  const claim = page.getByTestId('claim').first();
  await until(page, js, async (timeout) => {
    await expect(claim).toHaveAttribute('data-phase', 'Bound', { timeout });
  });
  const name = (await claim.getAttribute('data-claim'))!;
  await expect(notice).toHaveText(`Claim ${name} created.`);
  await expect(lifetime).toHaveValue('900');

  // The browser remembers it: the next visit starts with it.
  await page.goto('/');
  // The notice's live region is there, empty: no notice.
  await expect(notice).toHaveText('');
  await expect(lifetime).toHaveValue('900');

  await claim.getByText('Release…').click();
  await claim.getByRole('button', { name: 'Release', exact: true }).click();
  await expect(notice).toContainText('is being released');
  await until(page, js, async (timeout) => {
    await expect(page.getByTestId('claim')).toHaveCount(0, { timeout });
  });
});

test('an expired sandbox leaves the page by itself', async ({ page }, info) => {
  test.setTimeout(90_000);
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, '/sign-in', js);
  await signIn(page, operator.name, operator.password);
  const pool = page.locator('[data-pool="sandbox"]');
  await pool.getByLabel('Lifetime').selectOption('8');
  await pool.getByRole('button', { name: 'Claim a sandbox' }).click();
  await expect(page.getByRole('status')).toContainText('created');
  await until(page, js, async (timeout) => {
    await expect(page.getByTestId('claim')).toHaveCount(1, { timeout });
  });
  // Bound, then released by the claim controller when its 8 s are up: the dashboard and
  // the claim's own page both say so by themselves.
  const name = (await page.getByTestId('claim').getAttribute('data-claim'))!;
  const detail = await page.context().newPage();
  await open(detail, `/claims/demo/${name}`, js);
  await expect(detail.getByTestId('claim-name')).toHaveText(name);
  if (js) {
    // The page's countdown runs down to 0:00 and no further, and stops with the claim:
    // once it is gone there is no clock left ticking.
    const seconds: number[] = [];
    await expect(async () => {
      const gone = await detail.getByTestId('claim-gone').isVisible();
      for (const text of await detail.getByTestId('countdown').allTextContents()) {
        const clock = /\((\d+):(\d\d)\)/.exec(text);
        if (clock) seconds.push(Number(clock[1]) * 60 + Number(clock[2]));
      }
      expect(gone).toBe(true);
    }).toPass({ timeout: 40_000, intervals: [250] });
    expect(seconds.length, 'the countdown was seen').toBeGreaterThan(0);
    // A live update renders the clock anew from the server's count: a second either way.
    for (let i = 1; i < seconds.length; i++) expect(seconds[i]).toBeLessThanOrEqual(seconds[i - 1] + 1);
    expect(Math.min(...seconds)).toBeGreaterThanOrEqual(0);
    await expect(detail.getByTestId('countdown')).toHaveCount(0);
  }
  await until(
    page,
    js,
    async (timeout) => {
      await expect(page.getByTestId('claim')).toHaveCount(0, { timeout });
    },
    40_000,
  );
  await until(detail, js, async (timeout) => {
    await expect(detail.getByTestId('claim-gone')).toBeVisible({ timeout });
  });
});

test("an operator's All sandboxes: someone else's claim with its subject, released by the operator", async ({ browser }, info) => {
  test.setTimeout(90_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const dev = await personPage(browser, baseURL, js, developer);
  // A developer oversees nobody's sandboxes.
  await expect(dev.getByRole('heading', { name: 'All sandboxes' })).toHaveCount(0);
  const pool = dev.locator('[data-pool="sandbox"]');
  await pool.getByLabel('Lifetime').selectOption('900');
  await pool.getByRole('button', { name: 'Claim a sandbox' }).click();
  await expect(dev.getByRole('status')).toContainText('created');
  const mine = dev.getByTestId('claim').first();
  await until(dev, js, async (timeout) => {
    await expect(mine).toHaveAttribute('data-phase', 'Bound', { timeout });
  });
  const name = (await mine.getAttribute('data-claim'))!;

  const op = await personPage(browser, baseURL, js, operator);
  await expect(op.getByRole('heading', { name: 'All sandboxes' })).toBeVisible();
  const theirs = op.locator(`[data-testid="any-claim"][data-claim="${name}"]`);
  await expect(theirs).toContainText(developer.name);
  await expect(theirs.getByTestId('phase')).toHaveText('Bound');
  await expect(op.locator(`[data-testid="claim"][data-claim="${name}"]`)).toHaveCount(0);
  await theirs.getByText('Release…').click();
  await theirs.getByRole('button', { name: 'Release', exact: true }).click();
  await expect(op.getByRole('status')).toContainText('is being released');
  await until(op, js, async (timeout) => {
    await expect(op.locator(`[data-testid="any-claim"][data-claim="${name}"]`)).toHaveCount(0, { timeout });
  });
  await until(dev, js, async (timeout) => {
    await expect(dev.getByTestId('claim')).toHaveCount(0, { timeout });
  });
  await dev.context().close();
  await op.context().close();
});

test('the whole journey in Japanese, on a phone', async ({ browser }, info) => {
  test.setTimeout(90_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const context = await browser.newContext({
    baseURL: info.project.use.baseURL,
    javaScriptEnabled: js,
    locale: 'ja-JP',
    viewport: { width: 390, height: 844 },
  });
  const page = await context.newPage();
  await open(page, '/sign-in', js);
  await signIn(page, operator.name, operator.password, JAPANESE_SIGN_IN);
  await expect(page.getByRole('heading', { name: 'プール' })).toBeVisible();
  const pool = page.locator('[data-pool="sandbox"]');
  await pool.getByLabel('利用期間').selectOption('900');
  await pool.getByRole('button', { name: 'サンドボックスを確保' }).click();
  await expect(page.getByRole('status')).toContainText('を作成しました');
  const claim = page.getByTestId('claim').first();
  await until(page, js, async (timeout) => {
    await expect(claim.getByTestId('phase')).toHaveText('割り当て済み', { timeout });
  });
  await expect(claim.getByTestId('countdown')).toContainText(/あと 1[45] 分/);
  // 390 px wide: the badge and the header's buttons stay on one line each, inside the
  // screen (the table may scroll sideways).
  await oneLine(claim.getByTestId('phase'));
  for (const name of ['日本語', 'English', 'サインアウト']) {
    const button = page.getByRole('banner').getByRole('button', { name });
    await oneLine(button);
    const box = (await button.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(390);
  }

  const name = (await claim.getAttribute('data-claim'))!;
  await claim.getByRole('link', { name }).click();
  await expect(page.getByText('仮想マシン')).toBeVisible();
  await expect(page.getByRole('heading', { name: '接続' })).toBeVisible();
  await expect(page.getByRole('heading', { name: 'アテステーション' })).toBeVisible();
  await expect(page.getByTestId('ek-trust')).toContainText('トラストバンドルにつながっています');
  await expect(page.getByTestId('ek-fingerprint')).toHaveText(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  await page.getByText('解放…').click();
  await page.getByRole('button', { name: '解放', exact: true }).click();
  await expect(page.getByRole('status')).toContainText('を解放しています');
  await until(page, js, async (timeout) => {
    await expect(page.getByTestId('claim')).toHaveCount(0, { timeout });
  });
  await context.close();
});

test('a double click on "Claim a sandbox" makes one claim', async ({ page }, info) => {
  // Once hydrated, the first submit disables the button and holds back the second.
  // Without JavaScript the browser sends what it is given.
  test.skip(info.project.use.javaScriptEnabled === false, 'needs JavaScript');
  test.setTimeout(60_000);
  await open(page, '/sign-in', true);
  await signInLive(page);
  await expect(page.getByTestId('no-claims')).toBeVisible();
  await expect(page.getByTestId('claims-table')).toHaveCount(0);

  // A slow answer, so the second click of the double click lands while the first post is
  // still on its way (as with a person and a busy cluster); count what the browser sends.
  const posts: string[] = [];
  await page.route('**/claims', async (route) => {
    if (route.request().method() === 'POST') {
      posts.push(route.request().postData() ?? '');
      await new Promise((done) => setTimeout(done, 1_000));
    }
    // A post the browser gave up (replaced by a second one) has nothing to continue.
    await route.continue().catch(() => {});
  });
  const pool = page.locator('[data-pool="sandbox"]');
  await pool.getByLabel('Lifetime').selectOption('900');
  // What the button becomes once pressed, noted by the page for after the navigation
  // (Playwright's locators and evaluate wait for it, then see the next page).
  await page.evaluate(() => {
    const button = document.querySelector('[data-pool="sandbox"] button[type="submit"]')!;
    new MutationObserver(() => {
      const seen = [button.hasAttribute('disabled'), button.getAttribute('aria-busy'), button.textContent];
      sessionStorage.setItem('claim-button', JSON.stringify(seen));
    }).observe(button, { attributes: true, childList: true, characterData: true, subtree: true });
  });
  // Two clicks 100 ms apart with the mouse, which (unlike a locator's click) does not wait
  // for the navigation the first one starts: both land on this page.
  const box = (await pool.getByRole('button', { name: 'Claim a sandbox' }).boundingBox())!;
  const [x, y] = [box.x + box.width / 2, box.y + box.height / 2];
  await page.mouse.click(x, y);
  await page.waitForTimeout(100);
  await page.mouse.click(x, y);
  await expect(page.getByRole('status')).toContainText('created');
  await page.unroute('**/claims');
  expect(posts).toHaveLength(1);
  expect(await page.evaluate(() => sessionStorage.getItem('claim-button'))).toBe(
    JSON.stringify([true, 'true', 'Claiming…']),
  );
  await page.reload();
  const claim = page.getByTestId('claim');
  await expect(claim).toHaveCount(1);

  await claim.getByText('Release…').click();
  await claim.getByRole('button', { name: 'Release', exact: true }).click();
  await expect(page.getByRole('status')).toContainText('is being released');
  await until(page, true, async (timeout) => {
    await expect(page.getByTestId('claim')).toHaveCount(0, { timeout });
  });
});
