/**
 * What a limiter learnt of the API's fixed windows, kept in the output's state between runs so
 * that the next run meets the windows from its first turn instead of learning them again
 * (window-quota.ts, window-turn.ts). A hint, never a promise: an answer that disagrees (another
 * limit, a refusal where the facts say the window had turned) makes the limiter learn afresh.
 */
import { z } from 'zod';

export const WindowFactsSchema = z.object({
  /** Requests a window allows, as the API said (X-RateLimit-Limit) or as counted (Retry-After only). */
  limit: z.number().int().positive(),
  /**
   * Where a window turns: `named`, on the whole second a 429 names (Laravel on a file store);
   * `first-request`, `offsetMs` after the send of the window's first request (a window counted
   * from its first request: Laravel on Redis, express-rate-limit).
   */
  turn: z.enum(['named', 'first-request']),
  /** From the send of a window's first request to the send of the next window's first, ms. */
  offsetMs: z.number().positive().finite(),
  /** How the window was seen: its answers' rate-limit fields, or Retry-After alone. */
  source: z.enum(['headers', 'retry-after']),
});

export type WindowFacts = z.infer<typeof WindowFactsSchema>;
