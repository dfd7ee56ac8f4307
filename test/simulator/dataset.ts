/**
 * The simulated company's data: campaigns, their jobs, and each job's state. Only list items
 * are stored; reports are generated on demand from (seed, job id, version).
 */
import { campaignItem, jobItem } from './items.js';
import { rngFor, STREAM } from './prng.js';
import { corruptReport, driftReport, generateReport } from './reports.js';
import {
  type Dataset,
  DRIFT_CHANGES,
  type JobState,
  type ReportSize,
  type SimCampaign,
  type SimJob,
  type SimulatorOptions,
} from './types.js';

export const DEFAULTS = {
  seed: 1,
  campaigns: 4,
  jobsPerCampaign: 25,
  reportSize: 'small' as ReportSize,
  unpublishedShare: 0.1,
  surveyMissingJobs: 1,
  noSectionsJobs: 1,
  tryLaterJobs: 1,
  tryLaterAttempts: 2,
  invalidReportJobs: 0,
  forbiddenReportJobs: 0,
  driftedReportJobs: 0,
};

export const COMPANY_NAME = 'Acme Retail Insights B.V.';

class SimDataset implements Dataset {
  readonly company = COMPANY_NAME;
  readonly campaigns: SimCampaign[] = [];
  private readonly jobs = new Map<number, SimJob>();
  private readonly campaignsById = new Map<number, SimCampaign>();
  private nextJobId = 0;

  constructor(
    readonly seed: number,
    readonly reportSize: ReportSize,
  ) {}

  campaign(campaignId: number): SimCampaign | undefined {
    return this.campaignsById.get(campaignId);
  }

  job(jobId: number): SimJob | undefined {
    return this.jobs.get(jobId);
  }

  reportOf(jobId: number): unknown {
    const job = this.require(jobId);
    return generateReport({
      seed: this.seed,
      campaignId: job.campaignId,
      jobId,
      version: job.version,
      size: this.reportSize,
    });
  }

  invalidReportOf(jobId: number): unknown {
    return corruptReport(this.reportOf(jobId), this.seed, jobId);
  }

  driftedReportOf(jobId: number): unknown {
    const change = this.require(jobId).drift;
    if (change === undefined) throw new Error(`simulator: job ${jobId} has no drift`);
    return driftReport(this.reportOf(jobId), change);
  }

  publish(jobId: number): void {
    const job = this.require(jobId);
    job.state = 'published';
    job.item = jobItem(this.seed, jobId, job.version, true);
  }

  touch(jobId: number): void {
    const job = this.require(jobId);
    job.version += 1;
    job.item = jobItem(this.seed, jobId, job.version, job.state === 'published');
  }

  addJob(campaignId: number): SimJob {
    const campaign = this.campaignsById.get(campaignId);
    if (!campaign) throw new Error(`simulator: no campaign ${campaignId}`);
    return this.createJob(campaign, this.nextJobId + 1);
  }

  removeJob(jobId: number): void {
    const job = this.require(jobId);
    this.jobs.delete(jobId);
    const campaign = this.campaignsById.get(job.campaignId);
    if (campaign) campaign.jobs = campaign.jobs.filter((j) => j.id !== jobId);
  }

  /** Internal: append a campaign (generation only). */
  createCampaign(id: number): SimCampaign {
    const campaign: SimCampaign = { id, item: campaignItem(this.seed, id), jobs: [] };
    this.campaigns.push(campaign);
    this.campaignsById.set(id, campaign);
    return campaign;
  }

  /** Internal: append a published job to a campaign. */
  createJob(campaign: SimCampaign, id: number): SimJob {
    const job: SimJob = {
      id,
      campaignId: campaign.id,
      state: 'published',
      tryLaterAttempts: 0,
      invalid: false,
      forbidden: false,
      item: jobItem(this.seed, id, 1, true),
      version: 1,
    };
    campaign.jobs.push(job);
    this.jobs.set(id, job);
    this.nextJobId = Math.max(this.nextJobId, id);
    return job;
  }

  private require(jobId: number): SimJob {
    const job = this.jobs.get(jobId);
    if (!job) throw new Error(`simulator: no job ${jobId}`);
    return job;
  }
}

function count(value: number | undefined, fallback: number): number {
  return Math.max(0, Math.floor(value ?? fallback));
}

/** Marks disjoint, seeded subsets of the jobs with the special states the options ask for. */
function assignStates(dataset: SimDataset, options: SimulatorOptions, seed: number): void {
  const all = dataset.campaigns.flatMap((c) => c.jobs);
  const rng = rngFor(seed, STREAM.states);
  for (let i = all.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [all[i], all[j]] = [all[j] as SimJob, all[i] as SimJob];
  }
  let cursor = 0;
  const take = (n: number): SimJob[] => {
    const slice = all.slice(cursor, cursor + n);
    cursor += slice.length;
    return slice;
  };
  const setState = (jobs: SimJob[], state: JobState) => {
    for (const job of jobs) {
      job.state = state;
      job.item = jobItem(seed, job.id, job.version, false);
    }
  };
  setState(
    take(Math.round((options.unpublishedShare ?? DEFAULTS.unpublishedShare) * all.length)),
    'unpublished',
  );
  setState(take(count(options.surveyMissingJobs, DEFAULTS.surveyMissingJobs)), 'survey_missing');
  setState(take(count(options.noSectionsJobs, DEFAULTS.noSectionsJobs)), 'no_sections');
  const attempts = count(options.tryLaterAttempts, DEFAULTS.tryLaterAttempts);
  for (const job of take(count(options.tryLaterJobs, DEFAULTS.tryLaterJobs))) job.tryLaterAttempts = attempts;
  for (const job of take(count(options.invalidReportJobs, DEFAULTS.invalidReportJobs))) job.invalid = true;
  for (const job of take(count(options.forbiddenReportJobs, DEFAULTS.forbiddenReportJobs)))
    job.forbidden = true;
  // Taken last: datasets without drift are as they were. The changes in turn, so that n jobs
  // of n changes show each one once.
  const changes = options.driftChanges ?? DRIFT_CHANGES;
  take(count(options.driftedReportJobs, DEFAULTS.driftedReportJobs)).forEach((job, i) => {
    job.drift = changes[i % changes.length];
  });
}

/**
 * Builds the dataset: `campaigns` campaigns of exactly `jobsPerCampaign` jobs each. Ids are
 * globally unique, ascending, with gaps (never assume contiguous ids).
 */
export function generateDataset(options: SimulatorOptions = {}): Dataset {
  const seed = options.seed ?? DEFAULTS.seed;
  const dataset = new SimDataset(seed, options.reportSize ?? DEFAULTS.reportSize);
  const rng = rngFor(seed, STREAM.dataset);
  let campaignId = 100 + rng.int(0, 900);
  let jobId = 10_000 + rng.int(0, 90_000);
  for (let c = 0; c < count(options.campaigns, DEFAULTS.campaigns); c++) {
    const campaign = dataset.createCampaign(campaignId);
    campaignId += rng.int(1, 5);
    for (let j = 0; j < count(options.jobsPerCampaign, DEFAULTS.jobsPerCampaign); j++) {
      dataset.createJob(campaign, jobId);
      jobId += rng.int(1, 3);
    }
  }
  assignStates(dataset, options, seed);
  return dataset;
}
