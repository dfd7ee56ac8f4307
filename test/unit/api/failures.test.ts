import { describe, expect, it } from 'vitest';
import { accessDenied, authFailure, redactor } from '../../../shared/api/failures.js';
import { describeError } from '../../../shared/errors.js';

describe('redactor', () => {
  it('replaces the current key and every earlier one', () => {
    let key = 'first-key-123';
    const redact = redactor(() => key);

    expect(redact('sent first-key-123 twice: first-key-123')).toBe('sent [redacted] twice: [redacted]');
    key = 'second-key-456';
    expect(redact('first-key-123 then second-key-456')).toBe('[redacted] then [redacted]');
  });

  it('leaves text alone for a key too short to search for', () => {
    expect(redactor(() => 'a')('a cat')).toBe('a cat');
  });
});

describe('authFailure and accessDenied', () => {
  it('say what happened and what to do, in one line', () => {
    const expired = authFailure(
      '/v',
      { status: 401, errorCode: 'API_KEY_EXPIRED', apiMessage: 'API key has expired.' },
      'INTEGRATION_API_KEY',
    );
    expect(describeError(expired)).toBe(
      'API key expired (API_KEY_EXPIRED). Ask your account manager for a new key and update INTEGRATION_API_KEY',
    );

    const ip = accessDenied('/v', {
      status: 403,
      errorCode: 'IP_NOT_ALLOWED',
      apiMessage: 'Request IP is not allowed.',
    });
    expect(ip.message).toContain('IP_NOT_ALLOWED');
    expect(ip.hint).toMatch(/fixed egress IP/);

    const forbidden = accessDenied('/x/report', { status: 403, errorCode: 'FORBIDDEN', apiMessage: 'No.' });
    expect(forbidden.message).toBe('No access to /x/report (FORBIDDEN)');
  });
});
