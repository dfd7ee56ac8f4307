/**
 * What to check when the API gave no answer at all: the hint of the error that ends a call
 * whose every attempt failed before an HTTP status came. Node tells the kinds apart by the
 * error's code: a name that does not resolve (DNS), a port that refuses, no route, a TLS
 * failure, a connection dropped; a timeout is the client's own deadline.
 */

/** Codes of a TLS handshake or certificate failure. */
const TLS_CODE = /^(ERR_SSL_|ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/;

/**
 * The hint for a call to `baseUrl` (set by `source`, e.g. INTEGRATION_API_BASE_URL) that got no
 * answer: `cause` is the last network error, `detail` the failure (`timeout: …`, `network: …`).
 */
export function unreachableHint(baseUrl: string, source: string, cause: unknown, detail: string): string {
  const url = new URL(baseUrl);
  const host = url.hostname;
  const given = `${source} (${url.origin})`;
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOTFOUND')
    return `the host name ${host} does not resolve (DNS): check it in ${given}, and this machine's DNS and network`;
  if (code === 'EAI_AGAIN')
    return `the DNS lookup of ${host} failed for now (EAI_AGAIN): check this machine's network and DNS server, then run again`;
  if (code === 'ECONNREFUSED')
    return `${url.host} refused the connection: check the host and port in ${given}, that the API is up there, and that no firewall rejects the port`;
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH')
    return `no route to ${host} (${code}): check this machine's network connection, VPN and firewall`;
  if (code !== undefined && TLS_CODE.test(code))
    return `the TLS handshake with ${host} failed (${code}): check the scheme in ${given} (https:// for the API) and whether a proxy replaces the certificate`;
  if (detail.startsWith('timeout:'))
    return `${host} did not answer in time: check ${given}, and whether a firewall or proxy drops the connection without refusing it (this exporter connects directly, without a proxy)`;
  return `the connection to ${host} was dropped${code ? ` (${code})` : ''}: check ${given} (an https:// URL on an http:// port is dropped so), then the network, proxy and firewall`;
}
