import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../simulator/index.js';
import { get, jobsPath, reportPath, V1 } from './helpers.js';

describe('simulator authentication (spec 5 and 7)', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 11, campaigns: 2, jobsPerCampaign: 3 });
  });
  afterAll(() => sim.close());

  it('verifies the valid key with the company name', async () => {
    const reply = await get(sim, `${V1}/verify`);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toContain('application/json');
    expect(reply.json).toEqual({ data: { verified: true, company: { name: sim.dataset.company } } });
  });

  it.each([
    ['no Authorization header', null, 401, 'MISSING_API_KEY', 'API key is required.'],
    ['an empty bearer', '', 401, 'MISSING_API_KEY', 'API key is required.'],
    ['an unknown key', 'sim_live_nope', 401, 'INVALID_API_KEY', 'Invalid API key.'],
  ])('answers %s with %i %s', async (_name, key, status, code, message) => {
    const reply = await get(sim, `${V1}/campaigns`, { key });
    expect(reply.status).toBe(status);
    expect(reply.json).toEqual({ error_code: code, message });
  });

  it('answers a non-bearer scheme as a missing key', async () => {
    const reply = await get(sim, `${V1}/verify`, {
      key: null,
      headers: { authorization: `Basic ${sim.keys.valid}` },
    });
    expect(reply.json).toEqual({ error_code: 'MISSING_API_KEY', message: 'API key is required.' });
  });

  it('answers the expired key with 401 API_KEY_EXPIRED', async () => {
    const reply = await get(sim, `${V1}/verify`, { key: sim.keys.expired });
    expect(reply.status).toBe(401);
    expect(reply.json).toEqual({ error_code: 'API_KEY_EXPIRED', message: 'API key has expired.' });
  });

  it('answers the IP-restricted key with 403 IP_NOT_ALLOWED from 127.0.0.1', async () => {
    const reply = await get(sim, `${V1}/campaigns`, { key: sim.keys.ip_restricted });
    expect(reply.status).toBe(403);
    expect(reply.json).toEqual({ error_code: 'IP_NOT_ALLOWED', message: 'Request IP is not allowed.' });
  });

  it('answers the domain-restricted key with 403 unless the allowed Origin is sent', async () => {
    const denied = await get(sim, `${V1}/verify`, { key: sim.keys.domain_restricted });
    const wrong = await get(sim, `${V1}/verify`, {
      key: sim.keys.domain_restricted,
      headers: { origin: 'https://evil.example' },
    });
    const allowed = await get(sim, `${V1}/verify`, {
      key: sim.keys.domain_restricted,
      headers: { origin: sim.allowedOrigin },
    });
    const body = { error_code: 'DOMAIN_NOT_ALLOWED', message: 'Request domain/origin is not allowed.' };
    expect([denied.status, denied.json]).toEqual([403, body]);
    expect([wrong.status, wrong.json]).toEqual([403, body]);
    expect(allowed.status).toBe(200);
  });

  it('gives the other company its own name, its own (empty) campaigns and 403 on ours', async () => {
    const key = sim.keys.other_company;
    const campaign = sim.dataset.campaigns[0]!;
    const job = campaign.jobs[0]!;
    const verify = await get(sim, `${V1}/verify`, { key });
    const campaigns = await get(sim, `${V1}/campaigns`, { key });
    const jobs = await get(sim, jobsPath(campaign.id), { key });
    const report = await get(sim, reportPath(campaign.id, job.id), { key });
    const unknown = await get(sim, jobsPath(1), { key });
    expect(verify.json).toEqual({ data: { verified: true, company: { name: sim.otherCompany } } });
    expect(sim.otherCompany).not.toBe(sim.dataset.company);
    expect(campaigns.json).toEqual({
      data: [],
      meta: { current_page: 1, per_page: 10, total: 0, last_page: 1 },
    });
    const forbidden = { error_code: 'FORBIDDEN', message: 'You do not have access to this resource.' };
    expect([jobs.status, jobs.json]).toEqual([403, forbidden]);
    expect([report.status, report.json]).toEqual([403, forbidden]);
    expect(unknown.status).toBe(404);
  });

  it('answers a revoked key with 401 INVALID_API_KEY', async () => {
    const other = await startSimulator({ seed: 12, campaigns: 1, jobsPerCampaign: 1 });
    try {
      expect((await get(other, `${V1}/verify`)).status).toBe(200);
      other.revokeKey(other.keys.valid);
      const reply = await get(other, `${V1}/verify`);
      expect([reply.status, reply.json]).toEqual([
        401,
        { error_code: 'INVALID_API_KEY', message: 'Invalid API key.' },
      ]);
    } finally {
      await other.close();
    }
  });

  it('derives the keys from the seed and keeps them distinct', async () => {
    const again = await startSimulator({ seed: 11, campaigns: 1, jobsPerCampaign: 1 });
    await again.close();
    expect(again.keys).toEqual(sim.keys);
    expect(new Set(Object.values(sim.keys)).size).toBe(5);
  });
});
