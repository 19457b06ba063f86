import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { canonicalIp } from '../../outbound/address-policy.js';

/** Longest name kept for what is not an IP address (a forwarded header may hold anything). */
const MAX_OTHER_NAME = 64;

/**
 * A forwarded address may carry the client's port (an ALB with xff_header_client_port, `[v6]:port`):
 * the client picks its port, so a port must not make another client.
 */
function withoutPort(address: string): string {
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(address);
  if (v4 !== null) return v4[1] ?? address;
  return /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/.exec(address)?.[1] ?? address;
}

/**
 * The bucket of failed authentications a client address draws on. An IPv6 client usually holds a
 * whole /64 (its interface id is its own to choose), so the /64 is one client: per address, one
 * host could guess from 2^64 of them. IPv4-mapped IPv6 (a dual-stack socket's view of an IPv4
 * peer) is its IPv4 address, so one client has one bucket whichever way it connects.
 */
export function failureBucketOf(ip: string): string {
  const canonical = canonicalIp(withoutPort(ip));
  if (canonical === null) return ip.slice(0, MAX_OTHER_NAME);
  if (!canonical.includes(':')) return canonical;
  return `${canonical.split(':').slice(0, 4).join(':')}::/64`;
}

/**
 * Without ASSAY_TRUST_PROXY, X-Forwarded-For and Forwarded are ignored: behind a proxy every client
 * then has the proxy's address, and one client's failed authentications lock all of them out.
 * The first request that carries such a header says so in the log, once per process.
 * `true`, which once believed the leftmost (client-written) entry, now means one hop: said at start.
 */
export const proxyTrustWarnings = fp(async (app: FastifyInstance) => {
  const trust = app.services.config.trustProxy;
  if (trust.kind === 'hops' && trust.deprecatedTrue) {
    app.log.warn(
      'ASSAY_TRUST_PROXY=true is deprecated and now means one hop (as ASSAY_TRUST_PROXY=1): the ' +
        'client address is the rightmost X-Forwarded-For entry, the one the proxy in front of ' +
        'Assay added. Set the number of proxies in front, or their addresses/CIDRs, instead',
    );
  }
  if (trust.kind !== 'none') return;
  let warned = false;
  app.addHook('onRequest', (request, _reply, done) => {
    const { headers } = request;
    if (warned || (headers['x-forwarded-for'] === undefined && headers.forwarded === undefined)) {
      done();
      return;
    }
    warned = true;
    request.log.warn(
      { remoteAddress: request.ip },
      'a request arrived with X-Forwarded-For or Forwarded, but ASSAY_TRUST_PROXY is not set: ' +
        'the header is ignored, every client behind that proxy shares its address, and failed ' +
        'authentications from any of them (ASSAY_AUTH_FAIL_*) lock out all of them; set ' +
        'ASSAY_TRUST_PROXY to the number of proxies in front or their addresses (this is said once)',
    );
    done();
  });
});
