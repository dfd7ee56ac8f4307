/**
 * An API that gives no answer, each kind as Node reports it, against real sockets on this
 * machine: the error names what to check (the URL and where it is set, DNS, the port, the
 * network). And the client's signal ends a request in flight at once.
 */
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { IntegrationApiClient } from '../../../shared/api/client.js';
import { describeError, InterruptedError, TransientApiError } from '../../../shared/errors.js';

const SOURCE = 'INTEGRATION_API_BASE_URL';
const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  // A socket left unread never sees its peer's end: closed here, or close() waits for ever.
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const server of servers.splice(0)) {
    server.close();
    await once(server, 'close');
  }
});

/** A TCP server on 127.0.0.1 that does `onConnection` with every connection. */
async function tcpServer(onConnection: (socket: Socket) => void): Promise<string> {
  const server = createServer((socket) => {
    sockets.push(socket);
    onConnection(socket);
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address() as { port: number };
  return `http://127.0.0.1:${address.port}`;
}

/** A port on 127.0.0.1 that nothing listens on: one that was free a moment ago. */
async function closedPort(): Promise<string> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return `http://127.0.0.1:${port}`;
}

/** The error of a verify that gets one attempt. */
async function verifyError(
  baseUrl: string,
  options: { requestTimeoutMs?: number } = {},
): Promise<TransientApiError> {
  const client = new IntegrationApiClient({
    baseUrl,
    apiKey: 'sk_test_key',
    baseUrlSource: SOURCE,
    retry: { maxAttempts: 1 },
    ...options,
  });
  const error = await client.verify().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TransientApiError);
  return error as TransientApiError;
}

describe('an API that cannot be reached', () => {
  it('names the host and port that refused, and the variable that set them', async () => {
    const url = await closedPort();
    const error = await verifyError(url);
    expect(error.message).toContain('ECONNREFUSED');
    expect(error.hint).toBe(
      `${new URL(url).host} refused the connection: check the host and port in ${SOURCE} (${url}), that the API is up there, and that no firewall rejects the port`,
    );
    expect(describeError(error)).toMatch(
      /gave up after 1 attempt.*\. 127\.0\.0\.1:\d+ refused the connection/,
    );
  });

  it('says a host name that does not resolve is a DNS matter (.invalid never resolves)', async () => {
    const error = await verifyError('https://api.exporter-test.invalid');
    expect(error.message).toMatch(/ENOTFOUND|EAI_AGAIN/);
    expect(error.hint).toMatch(
      /^the (host name api\.exporter-test\.invalid does not resolve \(DNS\)|DNS lookup of api\.exporter-test\.invalid failed for now)/,
    );
    if (error.message.includes('ENOTFOUND'))
      expect(error.hint).toContain(`check it in ${SOURCE} (https://api.exporter-test.invalid)`);
  });

  it('tells a host that never answers (the deadline) from one that refuses', async () => {
    const url = await tcpServer(() => {
      // Accepts and says nothing.
    });
    const error = await verifyError(url, { requestTimeoutMs: 200 });
    expect(error.message).toContain('timeout');
    expect(error.hint).toMatch(
      /^127\.0\.0\.1 did not answer in time: check INTEGRATION_API_BASE_URL .*firewall or proxy/,
    );
  });

  it('says a dropped connection may be https:// on an http:// port', async () => {
    const url = await tcpServer((socket) => socket.destroy());
    const error = await verifyError(url);
    expect(error.hint).toMatch(
      /^the connection to 127\.0\.0\.1 was dropped( \(ECONNRESET\))?: check INTEGRATION_API_BASE_URL/,
    );
  });

  it('adds no such hint when the API answered (a 503 is the API, not the network)', async () => {
    const url = await tcpServer((socket) => {
      socket.once('data', () => socket.end('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n'));
    });
    const error = await verifyError(url);
    expect(error.message).toContain('HTTP 503');
    expect(error.hint).toBeUndefined();
  });
});

describe("the client's signal", () => {
  it('ends a request in flight at once and throws InterruptedError, never retrying', async () => {
    let connections = 0;
    const url = await tcpServer(() => {
      connections++; // never answers
    });
    const controller = new AbortController();
    const client = new IntegrationApiClient({
      baseUrl: url,
      apiKey: 'sk_test_key',
      signal: controller.signal,
    });
    const started = performance.now();
    const pending = client.verify();
    setTimeout(() => controller.abort(), 100);
    await expect(pending).rejects.toBeInstanceOf(InterruptedError);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(connections).toBe(1);
    // Interrupted for good: a later call sends nothing.
    await expect(client.verify()).rejects.toBeInstanceOf(InterruptedError);
    expect(connections).toBe(1);
  });
});
