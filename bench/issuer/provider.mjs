// npm oidc-provider configured like the console's issuer, for the side-by-side refresh
// benchmark of issue 17 (server/benches/issuer.rs starts it; `make bench-issuer` runs it).
//
//   node provider.mjs [PORT]        (or BENCH_ISSUER_PORT; default 0 = any free port)
//
// Listens on 127.0.0.1 only and prints `ready http://127.0.0.1:PORT` on stdout once it
// accepts connections. Like our issuer: one public client (no secret, PKCE S256
// required), codes and refresh tokens only, an RSA-3072 RS256 signing key generated at
// start, refresh-token rotation on every use, refresh tokens for `offline_access`, an ID
// token on every refresh, the default in-memory adapter. There is no person to sign in,
// so `/interaction/:uid` finishes login and consent at once (a Grant for `openid
// offline_access`); the authorization request, the code and PKCE stay the real ones.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';

const port = Number(process.argv[2] ?? process.env.BENCH_ISSUER_PORT ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`usage: node provider.mjs [PORT]  (got ${process.argv[2]})`);
  process.exit(2);
}

/** The one client, as `banlieue-cli` is registered with our issuer. */
const CLIENT_ID = 'bench-cli';
/** Its one loopback redirect URI (RFC 8252 §7.3). */
const REDIRECT_URI = 'http://127.0.0.1:53124/callback';
/** The account every automatic login signs in, with the groups our ID tokens carry. */
const ACCOUNT = { sub: 'admin', groups: ['admin'] };

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 3072 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'bench-rs256', alg: 'RS256', use: 'sig' };

const server = http.createServer();
server.listen(port, '127.0.0.1', () => {
  const { port: bound } = server.address();
  const issuer = `http://127.0.0.1:${bound}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: [REDIRECT_URI],
        id_token_signed_response_alg: 'RS256',
      },
    ],
    jwks: { keys: [signingKey] },
    pkce: { required: () => true },
    scopes: ['openid', 'offline_access'],
    claims: { openid: ['sub', 'groups'] },
    // Our ID tokens carry the groups; put them in oidc-provider's too.
    conformIdTokenClaims: false,
    findAccount: async (_ctx, id) => ({
      accountId: id,
      claims: async () => ({ ...ACCOUNT, sub: id }),
    }),
    rotateRefreshToken: () => true,
    issueRefreshToken: async (_ctx, client, code) =>
      client.grantTypeAllowed('refresh_token') && code.scopes.has('offline_access'),
    // Our defaults: 5-minute ID tokens, 12-hour refresh lifetime.
    ttl: {
      AccessToken: 300,
      IdToken: 300,
      AuthorizationCode: 60,
      RefreshToken: 12 * 3600,
      Grant: 12 * 3600,
      Interaction: 600,
      Session: 12 * 3600,
    },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  });
  // Only errors worth a line: the benchmark reads stdout for `ready` and nothing else.
  provider.on('server_error', (_ctx, error) => console.error('server_error', error));

  const callback = provider.callback();
  server.on('request', async (req, res) => {
    if (!req.url.startsWith('/interaction/')) {
      callback(req, res);
      return;
    }
    try {
      const details = await provider.interactionDetails(req, res);
      const accountId = details.session?.accountId ?? ACCOUNT.sub;
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId, clientId: details.params.client_id });
      grant.addOIDCScope('openid offline_access');
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
