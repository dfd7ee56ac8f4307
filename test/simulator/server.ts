/**
 * The simulator's HTTP server (node:http, 127.0.0.1 only). Per request, on arrival: route →
 * method → auth → scripted fault, else rate limit then random fault; then, after the latency
 * (plus a slow fault's delay), the answer: the early one, or the endpoint's with the limiter's
 * headers, delivered whole, truncated, or not at all (reset).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type Answer,
  brokenJsonAnswer,
  errorAnswer,
  htmlOkAnswer,
  jsonAnswer,
  methodNotAllowedAnswer,
  rateLimitedAnswer,
  serverErrorAnswer,
  validationAnswer,
} from './answers.js';
import { ALLOWED_ORIGIN, KeyRing, makeKeys, OTHER_COMPANY_NAME, type Principal } from './auth.js';
import { DEFAULTS, generateDataset } from './dataset.js';
import { type FaultPlan, Faults } from './faults.js';
import { Latency } from './latency.js';
import { RateLimiter } from './rate-limit.js';
import { answerRoute, matchRoute, type Route } from './routes.js';
import { clearStats, countOutcome, countRequest, countWindowStart, emptyStats } from './stats.js';
import type { Simulator, SimulatorOptions } from './types.js';

const HOST = '127.0.0.1';

interface Admitted {
  route: Route;
  principal: Principal;
  plan: FaultPlan;
  /** The rate limiter's headers for the answer. */
  headers: Record<string, string>;
}

/** Starts a simulator on 127.0.0.1 (port 0 = any free port). */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const seed = options.seed ?? DEFAULTS.seed;
  const dataset = generateDataset({ ...options, seed });
  const keys = makeKeys(seed);
  const keyRing = new KeyRing(keys);
  const limiter = new RateLimiter(options.rateLimit);
  const faults = new Faults(seed, options.faults);
  const latency = new Latency(seed, options.latencyMs);
  const stats = emptyStats();
  const timers = new Set<NodeJS.Timeout>();

  function deliver(res: ServerResponse, answer: Answer, truncate = false): void {
    if (res.destroyed || res.socket?.destroyed) {
      countOutcome(stats, 'aborted');
      return;
    }
    const body = Buffer.from(answer.body, 'utf8');
    res.writeHead(answer.status, { ...answer.headers, 'content-length': String(body.length) });
    if (!truncate) {
      countOutcome(stats, answer.status);
      res.end(body);
      return;
    }
    countOutcome(stats, 'truncated');
    // Half the body, then the connection is cut: the client has a Content-Length it never gets.
    const socket = res.socket;
    res.write(body.subarray(0, Math.floor(body.length / 2)), () => socket?.destroy());
  }

  function answerWith(plan: FaultPlan, route: Route, url: URL, principal: Principal): Answer | 'reset' {
    switch (plan.kind) {
      case '500':
      case '502':
      case '503':
        return serverErrorAnswer(Number(plan.kind) as 500 | 502 | 503);
      case 'reset':
        return 'reset';
      case '429':
        return rateLimitedAnswer(1);
      case '422':
        return validationAnswer({ per_page: ['The selected per page is invalid.'] });
      case 'invalid_json':
        return brokenJsonAnswer();
      case 'not_json_html':
        return htmlOkAnswer();
      default:
        return answerRoute({ route, query: url.searchParams, principal }, dataset);
    }
  }

  function respond(req: IncomingMessage, res: ServerResponse, admitted: Admitted) {
    const { plan, route, principal, headers } = admitted;
    let answer: Answer | 'reset';
    try {
      answer = answerWith(plan, route, new URL(req.url ?? '/', `http://${HOST}`), principal);
    } catch (error) {
      // A simulator bug must be loud, not a silent hang: log it and answer a JSON 500.
      console.error('simulator: handler failed', error);
      answer = jsonAnswer(500, { error_code: 'SIMULATOR_BUG', message: String(error) });
    }
    if (answer === 'reset') {
      countOutcome(stats, 'reset');
      req.socket.resetAndDestroy();
      return;
    }
    deliver(res, { ...answer, headers: { ...answer.headers, ...headers } }, plan.kind === 'truncate');
  }

  /** The answer that stops a request before its endpoint runs, or how to run it. */
  function admit(req: IncomingMessage, target: string, route: Route | undefined): Answer | Admitted {
    if (!route) return errorAnswer('NOT_FOUND');
    if (req.method !== 'GET') return methodNotAllowedAnswer();
    const auth = keyRing.authenticate(req.headers, req.socket.remoteAddress);
    if (auth.answer) return auth.answer;
    const scripted = faults.takeScript(target);
    if (scripted) return { route, principal: auth.principal, plan: scripted, headers: {} };
    const verdict = limiter.take(auth.principal.key);
    if (!verdict.ok) return rateLimitedAnswer(verdict.retryAfterSeconds, verdict.headers);
    if (verdict.windowStarted) countWindowStart(stats);
    return { route, principal: auth.principal, plan: faults.draw(), headers: verdict.headers };
  }

  /** Runs `run` after `delayMs` (now when 0), on a timer that close() clears. */
  function later(delayMs: number, run: () => void): void {
    if (delayMs <= 0) {
      run();
      return;
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      run();
    }, delayMs);
    timers.add(timer);
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const target = req.url ?? '/';
    const route = matchRoute(target.split('?', 1)[0] ?? '');
    countRequest(stats, route);
    const admitted = admit(req, target, route);
    if (!('plan' in admitted)) {
      later(latency.draw(), () => deliver(res, admitted));
      return;
    }
    later(latency.draw() + admitted.plan.delayMs, () => respond(req, res, admitted));
  }

  const server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: options.port ?? 0, host: HOST }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;

  return {
    url: `http://${HOST}:${port}`,
    keys,
    allowedOrigin: ALLOWED_ORIGIN,
    otherCompany: OTHER_COMPANY_NAME,
    dataset,
    stats,
    resetStats: () => clearStats(stats),
    setFaults: (next) => faults.set(next),
    setRateLimit: (limit) => limiter.set(limit),
    setLatency: (ms, jitterMs) => latency.set(ms, jitterMs),
    failNext: (match, kind, times = 1) => faults.failNext(match, kind, times),
    revokeKey: (key) => keyRing.revoke(key),
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
