// An OpenID Connect provider for pylog's OAUTHBEARER tests: the client_credentials grant, access
// tokens issued as signed JWTs (RFC 9068) for one resource server (the audience).
//
//   node provider.js <port> <config.json>
//
// config.json: {"keys": [private JWKs, the first signs], "audience": "...", "scope": "kafka ...",
//               "ttl": seconds, "clients": [{"client_id": "...", "client_secret": "..."}]}
// Prints "ready <issuer>" once it listens on 127.0.0.1:<port>. Keys rotate by starting it again on
// the same port with other keys.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const [port, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, 'utf8'));
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  jwks: { keys: config.keys },
  clients: config.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    // librdkafka sends the secret in a Basic header; other clients may post it
    token_endpoint_auth_method: c.auth_method || 'client_secret_basic',
  })),
  scopes: config.scope.split(' '),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // a client that names no resource gets a token for the Kafka cluster
      defaultResource: () => config.audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (resource !== config.audience) {
          throw new Error(`unknown resource ${resource}`);
        }
        return {
          scope: config.scope,
          audience: config.audience,
          accessTokenTTL: config.ttl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
});
provider.proxy = false;

const server = provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
