import { Browser, BrowserContext, Page } from '@playwright/test';
import AxeBuilder from '@axe-core/playwright';
import { test, expect, makePerson, open, signIn, signInAsAdmin } from './fixtures';

// axe-core on every page of the console, in English and Japanese, light and dark: no
// violation of a WCAG 2.1 A or AA rule. Each page is scanned as the browser shows it:
// hydrated in the JavaScript project; as the server sent it in the other. axe itself
// needs JavaScript in the page, so there the console's script and wasm are refused
// instead: nothing hydrates, and the page is the server's markup.

test.describe.configure({ mode: 'serial' });

const WCAG_21_AA = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];
const LOCALES = ['en', 'ja'] as const;
const SCHEMES = ['light', 'dark'] as const;
/** The system's light or dark, or dark chosen with the theme switch on a light system. */
type Scheme = (typeof SCHEMES)[number] | 'chosen-dark';

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
  scheme: Scheme,
  from?: BrowserContext,
): Promise<BrowserContext> {
  const context = await browser.newContext({
    baseURL,
    javaScriptEnabled: true,
    colorScheme: scheme === 'chosen-dark' ? 'light' : scheme,
    storageState: from ? await from.storageState() : undefined,
  });
  if (!javaScript) await context.route(/\/pkg\/.*\.(js|wasm)$/, (route) => route.abort());
  await context.addCookies([{ name: 'banlieue-lang', value: locale, url: baseURL }]);
  if (scheme === 'chosen-dark') await context.addCookies([{ name: 'banlieue-theme', value: 'dark', url: baseURL }]);
  return context;
}

/** A page to scan: its address, or how to reach it (a form's answer). */
type Visit = string | [label: string, reach: (page: Page) => Promise<void>];

/** Scans each of `visits` in every language and each of `schemes`; all violations at once. */
async function scan(
  browser: Browser,
  baseURL: string,
  js: boolean,
  visits: Visit[],
  from?: BrowserContext,
  schemes: readonly Scheme[] = SCHEMES,
) {
  const found: string[] = [];
  for (const locale of LOCALES) {
    for (const scheme of schemes) {
      const context = await contextFor(browser, baseURL, js, locale, scheme, from);
      const page = await context.newPage();
      for (const visit of visits) {
        const [label, reach] = typeof visit === 'string' ? [visit, (p: Page) => open(p, visit, js)] : visit;
        await reach(page);
        for (const v of await violations(page)) found.push(`${label} [${locale}, ${scheme}] ${v}`);
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

test('error pages, edit forms, and dark chosen on a light system', async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(300_000);
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const schemes = ['light', 'chosen-dark'] as const;

  // A developer meets 403 (an admin's page), 405 (an address that takes a form only)
  // and 401 (a form posted after the session ended).
  const axel = await makePerson(browser, baseURL, initialPassword, 'axel-axe', ['developer']);
  const developer = await browser.newContext({ baseURL, javaScriptEnabled: false });
  const signedIn = await developer.newPage();
  await signedIn.goto('/sign-in');
  await signIn(signedIn, axel.name, axel.password);
  await expect(signedIn.getByTestId('welcome')).toBeVisible();
  // (An error document is static HTML, no wasm to wait for: scanned once loaded.)
  const errorDocument = (path: string): Visit => [
    path,
    async (p) => {
      await p.goto(path);
      await p.waitForLoadState('networkidle');
    },
  ];
  const afterSessionEnded: Visit = [
    '401 (a form after the session ended)',
    async (p) => {
      await open(p, '/account', js);
      const cookies = await p.context().cookies();
      await p.context().clearCookies({ name: 'banlieue-session' });
      const refused = p.waitForResponse((r) => r.url().endsWith('/revoke-all'));
      await p.locator('form[action="/account/sessions/revoke-all"] button[type="submit"]').click();
      expect((await refused).status()).toBe(401);
      await p.waitForLoadState('domcontentloaded');
      await p.context().addCookies(cookies);
    },
  ];
  await scan(browser, baseURL, js, [errorDocument('/roles'), errorDocument('/users/admin/disable'), afterSessionEnded], developer, schemes);
  await developer.close();

  // An admin meets 400 (an address whose query cannot be read) and opens the edit forms
  // of a pool and of a custom role.
  await signInAsAdmin(page, initialPassword);
  const role = `axe-${Date.now() % 1_000_000}`;
  await open(page, '/roles', js);
  await page.getByLabel('Name', { exact: true }).fill(role);
  await page.getByLabel('list virtualmachineclaims').check();
  await page.getByRole('button', { name: 'Save role' }).click();
  await expect(page.getByRole('status')).toHaveText(`Role ${role} saved.`);
  await scan(
    browser,
    baseURL,
    js,
    [errorDocument('/audit?since=yesterday'), '/pools?edit=demo/sandbox', `/roles?edit=${role}`],
    page.context(),
    schemes,
  );
  await open(page, '/roles', js);
  await page.locator(`[data-role="${role}"]`).getByText('Delete…').click();
  await page.locator(`[data-role="${role}"]`).getByRole('button', { name: 'Delete this role' }).click();
  await expect(page.getByRole('status')).toHaveText(`Role ${role} deleted.`);
});
