import { test, expect } from './fixtures';

// How the site's files reach the browser (issue 18, "Delivery"): names carrying their
// content's hash, kept a year (immutable); pages never stored. The encodings themselves
// (brotli, gzip, none) are held by server/tests/assets.rs: only a release build
// (--precompress) has the compressed copies.

const HASHED = /\/pkg\/banlieue-console\.[A-Za-z0-9_-]{22}\.(css|js|wasm)$/;

test('the page is not stored; its stylesheet, script and wasm are hashed and immutable', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const assets: { url: string; cacheControl: string | undefined }[] = [];
  page.on('response', (response) => {
    if (new URL(response.url()).pathname.startsWith('/pkg/')) {
      assets.push({ url: response.url(), cacheControl: response.headers()['cache-control'] });
    }
  });
  const loaded = js ? ['.js', '.wasm'].map((end) => page.waitForResponse((r) => r.url().endsWith(end))) : [];
  const document = await page.goto('/sign-in');
  await Promise.all(loaded);
  expect(document!.headers()['cache-control']).toBe('no-store');

  // Without JavaScript the browser still preloads the wasm the page links.
  const kinds = new Set(assets.map((a) => new URL(a.url).pathname.split('.').pop()));
  for (const kind of js ? ['css', 'js', 'wasm'] : ['css']) expect(kinds).toContain(kind);
  for (const asset of assets) {
    expect(asset.url).toMatch(HASHED);
    expect(asset.cacheControl, asset.url).toBe('public, max-age=31536000, immutable');
  }
});

test('a browser that accepts no encoding gets the file itself', async ({ page, request }) => {
  await page.goto('/sign-in');
  const href = await page.locator('link[rel="stylesheet"]').getAttribute('href');
  const css = await request.get(href!, { headers: { 'Accept-Encoding': 'identity' } });
  expect(css.ok()).toBe(true);
  expect(css.headers()['content-encoding']).toBeUndefined();
  expect(css.headers()['content-type']).toMatch(/^text\/css/);
  expect(css.headers()['vary']).toBe('accept-encoding');
  expect(await css.text()).toContain('--color-');
});
