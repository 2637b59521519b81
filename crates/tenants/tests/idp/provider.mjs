// npm oidc-provider (a certified OpenID Provider) as a tenant's identity provider, for
// crates/tenants' tests (tests/support/idp.rs starts it).
//
//   node provider.mjs CONFIG.json
//
// CONFIG: { "port": 0, "kid": "k1", "clientId": "console", "redirectUri": "http://…",
//           "accounts": { "<login_hint>": { "<claim>": <value>, … } } }
//
// Listens on 127.0.0.1 only and prints `ready http://127.0.0.1:PORT` once it accepts
// connections. One public client (PKCE S256), an RSA-2048 RS256 key generated at start
// under `kid` (a restart with another kid is a provider that rotated its key and withdrew
// the old one). There is no person to sign in: `/interaction/:uid` signs in the account
// the authorization request's `login_hint` names, whose claims (each account's own,
// `sub` being its name) go into the ID token.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import Provider from 'oidc-provider';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: config.kid, alg: 'RS256', use: 'sig' };
const claimNames = [...new Set(Object.values(config.accounts).flatMap((claims) => Object.keys(claims)))];

const server = http.createServer();
server.listen(config.port ?? 0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: config.clientId,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [config.redirectUri],
        id_token_signed_response_alg: 'RS256',
      },
    ],
    jwks: { keys: [signingKey] },
    pkce: { required: () => true },
    scopes: ['openid'],
    claims: { openid: ['sub', ...claimNames] },
    conformIdTokenClaims: false,
    findAccount: async (_ctx, id) =>
      config.accounts[id] && {
        accountId: id,
        claims: async () => ({ ...config.accounts[id], sub: id }),
      },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  });
  provider.on('server_error', (_ctx, error) => console.error('server_error', error));

  const callback = provider.callback();
  server.on('request', async (req, res) => {
    if (!req.url.startsWith('/interaction/')) {
      callback(req, res);
      return;
    }
    try {
      const details = await provider.interactionDetails(req, res);
      const accountId = details.params.login_hint;
      if (!config.accounts[accountId]) throw new Error(`no account ${accountId}`);
      const grant = new provider.Grant({ accountId, clientId: details.params.client_id });
      grant.addOIDCScope('openid');
      const grantId = await grant.save();
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId }, consent: { grantId } },
        { mergeWithLastSubmission: false },
      );
    } catch (error) {
      res.statusCode = 400;
      res.end(`interaction failed: ${error.message}\n`);
    }
  });
  console.log(`ready ${issuer}`);
});
