/**
 * Builds a client against a scripted test server: sleeps are skipped (and recorded), events
 * collected, and the server closed after each test.
 */
import { afterEach } from 'vitest';
import { type ClientOptions, IntegrationApiClient, type RequestEvent } from '../../../shared/api/client.js';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import { SkippingClock } from '../../unit/api/fake-clock.js';
import { type Route, startServer, type TestServer } from './server.js';

export const API = '/integration/v1/client';
export const KEY = 'test-key-5f2c9a1e7b';

export interface Harness {
  server: TestServer;
  client: IntegrationApiClient;
  clock: SkippingClock;
  events: RequestEvent[];
}

const open: TestServer[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((server) => server.close()));
});

/** A server answering with `route`, and a client of it (options may override the defaults). */
export async function harness(route: Route, options: Partial<ClientOptions> = {}): Promise<Harness> {
  const server = await startServer(route);
  open.push(server);
  const clock = new SkippingClock();
  const events: RequestEvent[] = [];
  const client = new IntegrationApiClient({
    baseUrl: server.url,
    apiKey: KEY,
    clock,
    // Its own clock: `clock.sleeps` then holds the client's backoff sleeps only.
    limiter: new AdaptiveRateLimiter({ initialRate: 1000, maxRate: 1000, clock: new SkippingClock() }),
    onEvent: (event) => events.push(event),
    ...options,
  });
  return { server, client, clock, events };
}

/** Every item of an async iterable. */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}
