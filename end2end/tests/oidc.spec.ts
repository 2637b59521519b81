import fs from 'node:fs';
import * as oidc from 'openid-client';
import { test, expect, open, signIn, signInAsAdmin, NEW_ADMIN_PASSWORD } from './fixtures';

// A second relying party we did not write: npm's openid-client drives the issuer while
// Chromium plays the person — the sign-in card, then the confirmation, with JavaScript
// on and off. The browser's redirect to the client's loopback callback is captured
// instead of served, as a CLI's listener would receive it.

const REDIRECT = 'http://127.0.0.1:53124/callback';

// The first admin signs in here with the suite's password, whichever file set it.
test.beforeEach(async ({ browser, initialPassword }, info) => {
  const context = await browser.newContext({ baseURL: info.project.use.baseURL, javaScriptEnabled: false });
  await signInAsAdmin(await context.newPage(), initialPassword);
  await context.close();
});

async function discover(baseURL: string): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(baseURL), 'banlieue-cli', undefined, oidc.None(), {
    // The test console serves plain http on loopback.
    execute: [oidc.allowInsecureRequests],
  });
}

test('openid-client signs in with PKCE, refreshes and revokes', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const config = await discover(baseURL);
  expect(config.serverMetadata().issuer).toBe(baseURL);

  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const authorize = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT,
    scope: 'openid offline_access',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    audience: 'kubernetes',
  });

  let callback = '';
  await page.route('http://127.0.0.1:53124/**', (route) => {
    callback = route.request().url();
    return route.fulfill({ status: 200, contentType: 'text/plain', body: 'signed in' });
  });
  await open(page, authorize.href, js);
  await expect(page.getByRole('heading', { name: 'Sign in to continue to the command-line tool' })).toBeVisible();
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await expect(page.getByText('signed in')).toBeVisible();
  expect(callback).toContain('code=');

  const tokens = await oidc.authorizationCodeGrant(config, new URL(callback), {
    pkceCodeVerifier: verifier,
    expectedState: state,
    expectedNonce: nonce,
    idTokenExpected: true,
  });
  const claims = tokens.claims()!;
  expect(claims.sub).toBe('admin');
  expect(claims.aud).toContain('kubernetes');
  expect(claims.groups).toContain('admin');
  expect(tokens.refresh_token).toBeTruthy();

  const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
  expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
  expect(refreshed.claims()!.sub).toBe('admin');

  await oidc.tokenRevocation(config, refreshed.refresh_token!, { token_type_hint: 'refresh_token' });
  await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({
    error: 'invalid_grant',
  });
});

test('a signed-in person only confirms, and may cancel', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const config = await discover(baseURL);
  await open(page, '/sign-in', js);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await expect(page.getByTestId('welcome')).toBeVisible();

  const request = (state: string) =>
    oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT,
      scope: 'openid',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      state,
    });
  const callbacks: string[] = [];
  await page.route('http://127.0.0.1:53124/**', (route) => {
    callbacks.push(route.request().url());
    return route.fulfill({ status: 200, contentType: 'text/plain', body: 'back in the tool' });
  });

  await open(page, request('first').href, js);
  await expect(page.getByTestId('authorize-question')).toHaveText('Continue as admin to the command-line tool?');
  await page.getByRole('button', { name: 'Continue' }).click();
  await expect(page.getByText('back in the tool')).toBeVisible();
  const allowed = new URL(callbacks[0]);
  expect(allowed.searchParams.get('state')).toBe('first');
  expect(allowed.searchParams.get('code')).toBeTruthy();

  await open(page, request('second').href, js);
  await page.getByRole('button', { name: 'Cancel' }).click();
  await expect(page.getByText('back in the tool')).toBeVisible();
  const cancelled = new URL(callbacks[1]);
  expect(cancelled.searchParams.get('error')).toBe('access_denied');
  expect(cancelled.searchParams.get('state')).toBe('second');
});

test('the confirmation speaks Japanese', async ({ browser }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  const baseURL = info.project.use.baseURL!;
  const context = await browser.newContext({ baseURL, javaScriptEnabled: js, locale: 'ja-JP' });
  const page = await context.newPage();
  const config = await discover(baseURL);
  const authorize = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT,
    scope: 'openid',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
  });
  await open(page, authorize.href, js);
  await expect(page.getByRole('heading', { name: 'サインインしてコマンドラインツールに進みます' })).toBeVisible();
  await context.close();
});

test('My account offers a kubeconfig without any secret', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  await open(page, '/sign-in', js);
  await signIn(page, 'admin', NEW_ADMIN_PASSWORD);
  await page.getByRole('link', { name: 'My account' }).click();
  const download = page.waitForEvent('download');
  await page.getByTestId('download-kubeconfig').click();
  const file = await (await download).path();
  const text = fs.readFileSync(file, 'utf8');
  expect(text).toMatch(/server: https:\/\/127\.0\.0\.1:\d+/);
  expect(text).toContain('command: banlieue');
  expect(text).toContain(`- ${info.project.use.baseURL}`);
  expect(text).not.toMatch(/token:|password/);
});
