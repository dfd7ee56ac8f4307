import { describe, expect, it } from 'vitest';
import { ReportResponseSchema } from '../../../shared/api/schemas.js';
import {
  concreteSize,
  corruptReport,
  type Dataset,
  generateDataset,
  generateReport,
  type ReportSize,
} from '../../simulator/index.js';
import { countVariants, VARIANTS, type Variant } from './variants.js';

function publishedJobs(dataset: Dataset) {
  return dataset.campaigns.flatMap((c) => c.jobs).filter((j) => j.state === 'published');
}

function issuesOf(data: unknown): string {
  const result = ReportResponseSchema.safeParse({ data });
  return result.success ? '' : JSON.stringify(result.error.issues.slice(0, 3));
}

describe('report generator', () => {
  it.each(['tiny', 'small', 'mixed'] as const)(
    'makes %s reports that parse with ReportResponseSchema (20 seeds)',
    (size) => {
      let checked = 0;
      for (let seed = 1; seed <= 20; seed++) {
        const dataset = generateDataset({ seed, campaigns: 2, jobsPerCampaign: 10, reportSize: size });
        for (const job of publishedJobs(dataset)) {
          expect(issuesOf(dataset.reportOf(job.id))).toBe('');
          checked += 1;
        }
      }
      expect(checked).toBeGreaterThan(300);
    },
  );

  it('makes large reports of 50 sections x 30 questions that parse', () => {
    for (const seed of [1, 2]) {
      const data = generateReport({ seed, campaignId: 5, jobId: 77, version: 1, size: 'large' }) as {
        sections: Array<{ questions: unknown[] }>;
      };
      expect(issuesOf(data)).toBe('');
      expect(data.sections).toHaveLength(50);
      expect(data.sections.every((s) => s.questions.length === 30)).toBe(true);
    }
  });

  it.each([
    ['tiny', 1, 2, 2],
    ['small', 3, 5, 7],
  ] as const)(
    'sizes %s reports at %i..%i sections of up to %i questions',
    (size, minSections, maxSections, maxQ) => {
      for (let jobId = 1; jobId <= 40; jobId++) {
        const data = generateReport({ seed: 3, campaignId: 1, jobId, version: 1, size }) as {
          sections: Array<{ questions: unknown[] }>;
        };
        expect(data.sections.length).toBeGreaterThanOrEqual(minSections);
        expect(data.sections.length).toBeLessThanOrEqual(maxSections);
        for (const section of data.sections) expect(section.questions.length).toBeLessThanOrEqual(maxQ);
      }
    },
  );

  it('mixes mostly small, some tiny and a few large reports under "mixed"', () => {
    const counts = { tiny: 0, small: 0, large: 0 };
    for (let jobId = 1; jobId <= 2_000; jobId++) counts[concreteSize(9, jobId, 'mixed')] += 1;
    expect(counts.small).toBeGreaterThan(1_500);
    expect(counts.tiny).toBeGreaterThan(150);
    expect(counts.large).toBeGreaterThan(5);
    expect(counts.large).toBeLessThan(60);
  });

  it('is deterministic from (seed, job id, version) and changes with each of them', () => {
    const input = { seed: 5, campaignId: 10, jobId: 1234, version: 1, size: 'small' as ReportSize };
    const base = JSON.stringify(generateReport(input));
    expect(JSON.stringify(generateReport({ ...input }))).toBe(base);
    expect(JSON.stringify(generateReport({ ...input, seed: 6 }))).not.toBe(base);
    expect(JSON.stringify(generateReport({ ...input, jobId: 1235 }))).not.toBe(base);
    expect(JSON.stringify(generateReport({ ...input, version: 2 }))).not.toBe(base);
  });

  it('puts the job id, the campaign id and the list item status and score in the report', () => {
    const dataset = generateDataset({ seed: 8 });
    for (const job of publishedJobs(dataset)) {
      const report = dataset.reportOf(job.id) as {
        job: Record<string, unknown> & { campaign: { id: number } };
      };
      expect(report.job.id).toBe(job.id);
      expect(report.job.campaign.id).toBe(job.campaignId);
      expect(report.job.job_status).toBe(job.item.job_status);
      expect(report.job.job_score_percentage).toBe(job.item.job_score_percentage);
    }
  });

  it('breaks every invalid report so that ReportResponseSchema rejects it', () => {
    let checked = 0;
    for (let seed = 1; seed <= 30; seed++) {
      const dataset = generateDataset({
        seed,
        campaigns: 1,
        jobsPerCampaign: 12,
        invalidReportJobs: 3,
        reportSize: 'tiny',
      });
      const invalid = publishedJobs(dataset).filter((j) => j.invalid);
      expect(invalid).toHaveLength(3);
      for (const job of invalid) {
        expect(issuesOf(dataset.invalidReportOf(job.id))).not.toBe('');
        checked += 1;
      }
    }
    // every corruption is also applied to a valid report directly
    for (let jobId = 1; jobId <= 60; jobId++) {
      const valid = generateReport({ seed: 1, campaignId: 1, jobId, version: 1, size: 'small' });
      expect(issuesOf(corruptReport(valid, 1, jobId))).not.toBe('');
    }
    expect(checked).toBe(90);
  });

  it('covers every variant of spec 2.5 over seeds 1..6 (counted)', () => {
    const counts = new Map<Variant, number>();
    let reports = 0;
    for (let seed = 1; seed <= 6; seed++) {
      const dataset = generateDataset({ seed, campaigns: 2, jobsPerCampaign: 25 });
      for (const job of publishedJobs(dataset)) {
        countVariants(dataset.reportOf(job.id), counts);
        reports += 1;
      }
    }
    const missing = VARIANTS.filter((v) => !counts.get(v));
    expect(missing).toEqual([]);
    expect(reports).toBeGreaterThan(250);
    // the rarest variants still show up more than once across these reports
    for (const variant of VARIANTS) expect(counts.get(variant), variant).toBeGreaterThanOrEqual(2);
  });
});
