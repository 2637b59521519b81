import fs from 'node:fs';
import path from 'node:path';
import { Browser, CDPSession } from '@playwright/test';
import { test, expect, signIn, NEW_ADMIN_PASSWORD } from '../tests/fixtures';

// The first visit to the dashboard over a slow link (issue 18, "Delivery"): 1.6 Mbit/s
// down, 150 ms latency, an empty cache, signed in. Two ways side by side, alternating in
// one run against the same console:
//   before: the browser accepts no encoding (Accept-Encoding: identity), so it gets the
//           files as they were served before precompression;
//   after:  the browser's own Accept-Encoding, so it gets the brotli copies.
// Measured: bytes on the wire (CDP encodedDataLength: headers and body) for the wasm and
// for the whole visit, and the time from the request of the page to the request of its
// live stream (/events/dashboard), which the dashboard opens once hydrated: from then on
// it reacts. The medians of ROUNDS rounds go to stdout and to bench-results/delivery.md.

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const LINK = { latency: 150, downloadThroughput: 1_600_000 / 8, uploadThroughput: 750_000 / 8 };

type Way = 'before' | 'after';
type Visit = { wasm: number; total: number; interactive: number; encoding: string };

/** One first visit in a fresh context (no cache) carrying the session's cookies. */
async function visit(browser: Browser, baseURL: string, cookies: string, way: Way): Promise<Visit> {
  const context = await browser.newContext({
    baseURL,
    storageState: JSON.parse(cookies),
    extraHTTPHeaders: way === 'before' ? { 'Accept-Encoding': 'identity' } : {},
  });
  const page = await context.newPage();
  const cdp: CDPSession = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  await cdp.send('Network.emulateNetworkConditions', { offline: false, ...LINK });

  const urls = new Map<string, string>();
  const started = new Map<string, number>();
  const sizes = new Map<string, number>();
  let encoding = '';
  cdp.on('Network.requestWillBeSent', (e) => {
    urls.set(e.requestId, e.request.url);
    started.set(e.requestId, e.timestamp);
  });
  cdp.on('Network.responseReceived', (e) => {
    if (e.response.url.endsWith('.wasm')) {
      const headers = Object.fromEntries(Object.entries(e.response.headers).map(([k, v]) => [k.toLowerCase(), v]));
      encoding = String(headers['content-encoding'] ?? 'identity');
    }
  });
  cdp.on('Network.loadingFinished', (e) => sizes.set(e.requestId, e.encodedDataLength));

  const live = page.waitForRequest((r) => r.url().endsWith('/events/dashboard'), { timeout: 120_000 });
  await page.goto('/', { timeout: 120_000 });
  await live;
  await page.waitForLoadState('load');
  await expect(page.getByTestId('welcome')).toBeVisible();

  const id = (match: (url: string) => boolean) => [...urls].find(([, url]) => match(url))?.[0];
  const documentId = id((url) => new URL(url).pathname === '/')!;
  const wasmId = id((url) => url.endsWith('.wasm'))!;
  const eventsId = id((url) => url.endsWith('/events/dashboard'))!;
  const result = {
    wasm: sizes.get(wasmId)!,
    // Every request but the live stream, which stays open.
    total: [...sizes].filter(([rid]) => rid !== eventsId).reduce((sum, [, n]) => sum + n, 0),
    interactive: (started.get(eventsId)! - started.get(documentId)!) * 1000,
    encoding,
  };
  await context.close();
  return result;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const kb = (n: number) => `${(n / 1000).toFixed(1)} KB`;
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

test('first visit to the dashboard over 1.6 Mbit/s and 150 ms, before and after', async ({ page, browser, initialPassword }, info) => {
  test.setTimeout(600_000);
  const baseURL = info.project.use.baseURL!;
  await page.goto('/sign-in');
  await signIn(page, 'admin', initialPassword);
  await page.getByLabel('Current password').fill(initialPassword);
  await page.getByLabel('New password', { exact: true }).fill(NEW_ADMIN_PASSWORD);
  await page.getByLabel('Repeat the new password').fill(NEW_ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Change password' }).click();
  await expect(page.getByTestId('welcome')).toBeVisible();
  const cookies = JSON.stringify(await page.context().storageState());

  const visits: Record<Way, Visit[]> = { before: [], after: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const way of ['before', 'after'] as Way[]) visits[way].push(await visit(browser, baseURL, cookies, way));
  }
  expect(visits.before.map((v) => v.encoding)).toEqual(visits.before.map(() => 'identity'));
  expect(visits.after.map((v) => v.encoding)).toEqual(visits.after.map(() => 'br'));

  const row = (way: Way, label: string) => {
    const v = visits[way];
    return `| ${label} | ${v[0].encoding} | ${kb(median(v.map((x) => x.wasm)))} | ${kb(median(v.map((x) => x.total)))} | ${s(median(v.map((x) => x.interactive)))} |`;
  };
  const table = [
    `First visit to the dashboard, 1.6 Mbit/s down, 150 ms latency, empty cache; median of ${ROUNDS} rounds each, alternating.`,
    '',
    '| | wasm encoding | wasm transferred | whole visit transferred | time to interactive |',
    '|---|---|---|---|---|',
    row('before', 'before (uncompressed)'),
    row('after', 'after (precompressed)'),
  ].join('\n');
  console.log(`\n${table}\n`);
  const out = path.join(__dirname, 'bench-results');
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'delivery.md'), `${table}\n`);
  // The target for the wasm on the wire.
  expect(median(visits.after.map((v) => v.wasm))).toBeLessThanOrEqual(250_000);
});
