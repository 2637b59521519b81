import { Browser, BrowserContext, Page } from '@playwright/test';
import AxeBuilder from '@axe-core/playwright';
import { test, expect, open, signInAsAdmin } from './fixtures';

// axe-core on every page of the console, in English and Japanese, light and dark: no
// violation of a WCAG 2.1 A or AA rule. Each page is scanned as the browser shows it:
// hydrated in the JavaScript project; as the server sent it in the other. axe itself
// needs JavaScript in the page, so there the console's script and wasm are refused
// instead: nothing hydrates, and the page is the server's markup.

test.describe.configure({ mode: 'serial' });

const WCAG_21_AA = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];
const LOCALES = ['en', 'ja'] as const;
const SCHEMES = ['light', 'dark'] as const;

/** The violations axe finds on `page`, one line each (rule, impact, where). */
async function violations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(WCAG_21_AA).analyze();
  return results.violations.flatMap((v) =>
    v.nodes.map((n) => `${v.id} (${v.impact}) at ${n.target.join(' ')}: ${n.failureSummary?.replace(/\s+/g, ' ')}`),
  );
}

/** A context in `locale` (the console's language cookie) and `scheme`. */
async function contextFor(
  browser: Browser,
  baseURL: string,
  javaScript: boolean,
  locale: string,
  scheme: 'light' | 'dark',
  from?: BrowserContext,
): Promise<BrowserContext> {
  const context = await browser.newContext({
    baseURL,
    javaScriptEnabled: true,
    colorScheme: scheme,
    storageState: from ? await from.storageState() : undefined,
  });
  if (!javaScript) await context.route(/\/pkg\/.*\.(js|wasm)$/, (route) => route.abort());
  await context.addCookies([{ name: 'banlieue-lang', value: locale, url: baseURL }]);
  return context;
}

/** Scans each of `paths` in every language and scheme; all violations at once. */
async function scan(browser: Browser, baseURL: string, js: boolean, paths: string[], from?: BrowserContext) {
  const found: string[] = [];
  for (const locale of LOCALES) {
    for (const scheme of SCHEMES) {
      const context = await contextFor(browser, baseURL, js, locale, scheme, from);
      const page = await context.newPage();
      for (const path of paths) {
        await open(page, path, js);
        for (const v of await violations(page)) found.push(`${path} [${locale}, ${scheme}] ${v}`);
      }
      await context.close();
    }
  }
  expect(found, found.join('\n')).toEqual([]);
}

test('signed out: sign-in, an error document, an unknown page', async ({ browser }, info) => {
  test.setTimeout(120_000);
  const js = info.project.use.javaScriptEnabled !== false;
  // /sign-out takes POST only: its GET is the console's error document.
  await scan(browser, info.project.use.baseURL!, js, ['/sign-in', '/sign-out', '/no-such-page']);
});

test('signed in: every page of the console, a sandbox of its own included', async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(240_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  await signInAsAdmin(page, initialPassword);

  // A sandbox, so the dashboard has rows and the claim page a claim.
  await open(page, '/', js);
  const pool = page.locator('[data-pool="sandbox"]');
  await expect(async () => {
    await page.reload();
    await expect(pool.getByTestId('pool-counts')).toContainText('ready', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  await pool.getByLabel('Lifetime').selectOption('900');
  await pool.getByRole('button', { name: 'Claim a sandbox' }).click();
  await expect(page.getByRole('status').first()).toContainText('created');
  const claim = page.getByTestId('claim').first();
  const name = (await claim.getAttribute('data-claim'))!;

  // Live regions: the notice's is on the page before any notice; a countdown's clock is
  // none (it would speak every second), and its own region stays quiet between milestones.
  await expect(async () => {
    if (!js) await page.reload();
    await expect(claim).toHaveAttribute('data-phase', 'Bound', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  await open(page, '/', js);
  await expect(page.getByTestId('notice')).toHaveAttribute('role', 'status');
  await expect(page.getByTestId('notice')).toHaveText('');
  const countdown = claim.getByTestId('countdown');
  expect(await countdown.evaluate((el) => !!el.closest('[aria-live], [role="status"], [role="alert"]'))).toBe(false);
  const announcement = claim.getByTestId('countdown-announcement');
  await expect(announcement).toHaveAttribute('aria-live', 'polite');
  if (js) {
    const before = await countdown.textContent();
    await expect(countdown).not.toHaveText(before!, { timeout: 3_000 });
  }
  await expect(announcement).toHaveText('');
  // All sandboxes shows the same claim: only one of the two speaks.
  await expect(page.getByTestId('any-claim').getByTestId('countdown-announcement')).toHaveCount(0);

  const authorize =
    '/oidc/authorize?response_type=code&client_id=banlieue-cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A53124%2Fcallback' +
    '&scope=openid&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256';
  await scan(
    browser,
    baseURL,
    js,
    ['/', `/claims/demo/${name}`, '/pools', '/users', '/users/admin', '/roles', '/audit', '/account', '/change-password', authorize],
    page.context(),
  );

  await open(page, `/claims/demo/${name}`, js);
  await page.getByText('Release…').click();
  await page.getByRole('button', { name: 'Release', exact: true }).click();
  await expect(page.getByRole('status').first()).toContainText('is being released');
});
