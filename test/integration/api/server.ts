/**
 * A tiny scripted HTTP server on 127.0.0.1 for client tests: every request is recorded and
 * answered by a route function, which can also reset the connection, cut the body short or
 * answer late. Exact control of each answer, which the full simulator does not aim at.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  /** A string is sent as is; anything else as JSON. Default: no body. */
  body?: unknown;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Destroy the socket without an answer. */
  reset?: boolean;
  /** Announce the whole body's length but send only its first half, then close. */
  truncate?: boolean;
  /** Answer by hand (endless or dripping bodies, odd framing): the other fields are ignored. */
  raw?: (response: http.ServerResponse, request: http.IncomingMessage) => void;
}

export interface RecordedRequest {
  method: string;
  /** Path and query. */
  url: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  /** 1-based index of this request among those with the same path (query ignored). */
  nth: number;
}

export type Route = (request: RecordedRequest) => Reply | Promise<Reply>;

export interface TestServer {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export async function startServer(route: Route): Promise<TestServer> {
  const requests: RecordedRequest[] = [];
  const perPath = new Map<string, number>();
  const server = http.createServer(async (req, res) => {
    const parsed = new URL(req.url ?? '/', 'http://localhost');
    const nth = (perPath.get(parsed.pathname) ?? 0) + 1;
    perPath.set(parsed.pathname, nth);
    const recorded: RecordedRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      path: parsed.pathname,
      query: parsed.searchParams,
      headers: req.headers,
      nth,
    };
    requests.push(recorded);
    const reply = await route(recorded);
    if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
    if (reply.raw) {
      reply.raw(res, req);
      return;
    }
    if (reply.reset) {
      req.socket.destroy();
      return;
    }
    const text =
      reply.body === undefined
        ? ''
        : typeof reply.body === 'string'
          ? reply.body
          : JSON.stringify(reply.body);
    const bytes = Buffer.from(text, 'utf8');
    res.writeHead(reply.status ?? 200, {
      'content-type': typeof reply.body === 'string' ? 'text/html' : 'application/json',
      'content-length': String(bytes.length),
      ...reply.headers,
    });
    if (reply.truncate) {
      res.write(bytes.subarray(0, Math.floor(bytes.length / 2)));
      setTimeout(() => req.socket.destroy(), 5);
      return;
    }
    res.end(bytes);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An error answer as spec section 7 writes it. */
export function errorReply(
  status: number,
  errorCode: string,
  message: string,
  extra: Record<string, unknown> = {},
): Reply {
  return { status, body: { error_code: errorCode, message, ...extra } };
}
