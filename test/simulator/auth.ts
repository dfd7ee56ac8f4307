/**
 * API keys and the checks of spec section 5: missing, unknown (or revoked), expired, restricted
 * to an IP, restricted to an origin, and a key of another company.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { type Answer, errorAnswer } from './answers.js';
import { rngFor, STREAM } from './prng.js';
import type { SimulatorKeys } from './types.js';

/** The IP the ip_restricted key is bound to (TEST-NET-3): never the loopback the tests use. */
export const RESTRICTED_IP = '203.0.113.7';
/** The only Origin the domain_restricted key accepts. */
export const ALLOWED_ORIGIN = 'https://reports.acme.example';
export const OTHER_COMPANY_NAME = 'Globex Field Services Ltd';

export type CompanyRef = 'main' | 'other';

export interface Principal {
  key: string;
  company: CompanyRef;
}

interface KeyRule {
  company: CompanyRef;
  expired?: boolean;
  allowedIps?: string[];
  allowedOrigins?: string[];
}

/** Keys derived from the seed, shaped like real ones (prefix + 40 hex). */
export function makeKeys(seed: number): SimulatorKeys {
  const rng = rngFor(seed, STREAM.keys);
  const key = (tag: string) => `sim_${tag}_${rng.hex(40)}`;
  return {
    valid: key('live'),
    expired: key('live'),
    ip_restricted: key('live'),
    domain_restricted: key('live'),
    other_company: key('live'),
  };
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

function normaliseIp(address: string | undefined): string {
  return (address ?? '').replace(/^::ffff:/, '');
}

export type AuthResult =
  | { principal: Principal; answer?: undefined }
  | { principal?: undefined; answer: Answer };

export class KeyRing {
  private readonly rules = new Map<string, KeyRule>();

  constructor(keys: SimulatorKeys) {
    this.rules.set(keys.valid, { company: 'main' });
    this.rules.set(keys.expired, { company: 'main', expired: true });
    this.rules.set(keys.ip_restricted, { company: 'main', allowedIps: [RESTRICTED_IP] });
    this.rules.set(keys.domain_restricted, { company: 'main', allowedOrigins: [ALLOWED_ORIGIN] });
    this.rules.set(keys.other_company, { company: 'other' });
  }

  /** Afterwards the key is unknown: 401 INVALID_API_KEY. */
  revoke(key: string): void {
    this.rules.delete(key);
  }

  authenticate(headers: IncomingHttpHeaders, remoteAddress: string | undefined): AuthResult {
    const header = headers.authorization;
    const key = header ? BEARER.exec(header)?.[1] : undefined;
    if (!key) return { answer: errorAnswer('MISSING_API_KEY') };
    const rule = this.rules.get(key);
    if (!rule) return { answer: errorAnswer('INVALID_API_KEY') };
    if (rule.expired) return { answer: errorAnswer('API_KEY_EXPIRED') };
    if (rule.allowedIps && !rule.allowedIps.includes(normaliseIp(remoteAddress))) {
      return { answer: errorAnswer('IP_NOT_ALLOWED') };
    }
    if (rule.allowedOrigins && !rule.allowedOrigins.includes(headers.origin ?? '')) {
      return { answer: errorAnswer('DOMAIN_NOT_ALLOWED') };
    }
    return { principal: { key, company: rule.company } };
  }
}
