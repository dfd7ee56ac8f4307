/**
 * A run's counts, requests and status, added up one campaign at a time from its records, with
 * the staged files and outcomes each campaign brings to its closing (`closing.ts` writes them as
 * pieces). Every listed job gets exactly one outcome.
 */

import { DriftTally } from '../schema-drift.js';
import { emptyCounts, type Manifest, ManifestSchema, OUTCOME_COUNTER, runStatus } from '../state/manifest.js';
import {
  addRequestCounts,
  type Fatal,
  type PlanRecord,
  type RunRecord,
  type StagedFile,
  type UnitSummary,
} from '../state/records.js';
import { schemaContractOf } from '../tables.js';
import type { CampaignOutcomes } from './closing.js';
import type { RecordsSource, RunRecords } from './run-records.js';

/**
 * Counts, requests and status of a run, added up one campaign at a time; every listed job gets
 * exactly one outcome.
 */
export class ClosingTally {
  readonly counts = emptyCounts();
  private requests;
  private fatal: Fatal | undefined;
  private readonly unlisted: number[] = [];
  private readonly partlyListed: number[] = [];
  private readonly notFound: number[] = [];
  /** The drift of every unit whose files the run publishes: bounded (`DRIFT_ENTRIES_MAX`). */
  private readonly drift = new DriftTally();

  constructor(
    private readonly record: RunRecord,
    unrecorded: RecordsSource['unrecorded'],
    /** Jobs whose unit never reported are deferred (the run's deadline cut it), not failed. */
    private readonly deferUnreported = false,
  ) {
    this.requests = addRequestCounts(record.requests, unrecorded);
    this.fatal = record.fatal;
    this.counts.campaigns = record.campaign_ids.length + record.campaigns_invalid;
    this.counts.campaigns_invalid = record.campaigns_invalid;
    this.counts.duplicates = record.duplicates;
  }

  /**
   * Adds one campaign; returns the staged files it lists and, when its listing completed, the
   * outcomes to record in its state.
   */
  add(
    campaignId: number,
    plan: PlanRecord | undefined,
    units: ReadonlyMap<string, UnitSummary>,
  ): { staged: StagedFile[]; outcomes: CampaignOutcomes | undefined } {
    // A campaign whose jobs were never listed (its plan kept failing, or its pages contradicted
    // themselves): its jobs are unknown.
    if (!this.record.fatal && (plan === undefined || plan.unlisted !== undefined))
      this.unlisted.push(campaignId);
    if (!plan) return { staged: [], outcomes: undefined };
    const staged = [...plan.staged];
    this.requests = addRequestCounts(this.requests, plan.requests);
    this.counts.duplicates += plan.duplicates;
    for (const name of plan.units) {
      const unit = units.get(name);
      staged.push(...(unit?.staged ?? []));
      // A unit's summary holds the drift of all its deliveries so far: merged once per unit.
      if (unit?.drift) this.drift.merge(unit.drift);
    }
    if (plan.unlisted !== undefined) return { staged, outcomes: undefined };
    this.fatal ??= plan.fatal;
    if (plan.jobs_invalid > 0) this.partlyListed.push(plan.campaign_id);
    this.counts.jobs += plan.jobs;
    this.counts.reports_unchanged += plan.unchanged.length;
    this.counts.reports_invalid += plan.jobs_invalid;
    let accounted = plan.unchanged.length + plan.jobs_invalid;
    // The outcomes to record: none for a plan stopped by a fatal answer (its jobs are asked for
    // again). A campaign that answered 404 for its jobs listed none: its state forgets them all,
    // as the latest views and current tables do, so that they are fetched again should it come back.
    const jobs: CampaignOutcomes['jobs'] = plan.fatal
      ? []
      : plan.unchanged.map((j) => ({ ...j, outcome: 'unchanged' as const }));
    // A job counts once, whatever unit it stands in (units are cut once per plan; this is a guard).
    const counted = new Set<string>();
    for (const name of plan.units) {
      const unit = units.get(name);
      if (unit) {
        this.requests = addRequestCounts(this.requests, unit.requests);
        this.fatal ??= unit.fatal;
      }
      for (const [jobId, result] of Object.entries(unit?.jobs ?? {})) {
        // A job still pending when the run ends failed in it; the next run asks again.
        const outcome = result.outcome === 'pending' ? 'failed' : result.outcome;
        if (!plan.fatal) jobs.push({ job_id: Number(jobId), fp: result.fp, outcome });
        if (result.outcome === 'pending' || counted.has(jobId)) continue;
        counted.add(jobId);
        this.counts[OUTCOME_COUNTER[result.outcome]]++;
        if (result.outcome === 'not_found') this.notFound.push(Number(jobId));
        accounted++;
      }
    }
    const missing = plan.jobs - accounted;
    if (this.deferUnreported && !plan.fatal) {
      // Jobs of units that never reported wait for the next run, which asks for them again.
      let deferred = 0;
      plan.units.forEach((name, i) => {
        if (units.has(name)) return;
        for (const job of plan.fetch.slice(i * plan.unit_size, (i + 1) * plan.unit_size)) {
          jobs.push({ ...job, outcome: 'deferred' });
          deferred++;
        }
      });
      this.counts.reports_deferred = (this.counts.reports_deferred ?? 0) + deferred;
      this.counts.reports_failed += missing - deferred;
    } else {
      // Jobs listed but never brought to an outcome (unit lost, still pending, listing cut short).
      this.counts.reports_failed += missing;
    }
    return { staged, outcomes: plan.fatal ? undefined : { campaign_id: plan.campaign_id, jobs } };
  }

  /** The manifest, `files` empty: publishing fills them in. */
  manifest(finishedAt: Date): Manifest {
    const { record } = this;
    const counts = { ...this.counts };
    if (!counts.reports_deferred) delete counts.reports_deferred;
    return ManifestSchema.parse({
      run_id: record.run_id,
      dt: record.dt,
      mode: record.mode,
      status: runStatus(counts, this.fatal !== undefined, this.unlisted.length),
      started_at: record.started_at,
      finished_at: finishedAt.toISOString(),
      counts,
      requests: this.requests,
      files: [],
      ...(record.company_name !== undefined ? { company_name: record.company_name } : {}),
      ...(record.table_format !== undefined ? { table_format: record.table_format } : {}),
      // A freeze run's manifest gets neither key: it stays as it was before the option.
      ...(schemaContractOf(record) === 'evolve'
        ? { schema_contract: 'evolve', schema_drift: this.drift.entries() }
        : {}),
      ...(this.unlisted.length > 0 ? { unlisted_campaigns: this.unlisted } : {}),
      ...(this.partlyListed.length > 0
        ? { partially_listed_campaigns: [...this.partlyListed].sort((a, b) => a - b) }
        : {}),
      ...(this.notFound.length > 0 ? { not_found_jobs: [...this.notFound].sort((a, b) => a - b) } : {}),
      ...(this.fatal
        ? {
            error: {
              message: this.fatal.message,
              ...(this.fatal.error_code ? { error_code: this.fatal.error_code } : {}),
            },
          }
        : {}),
    });
  }
}

/** Counts, requests and status of a run from its records held in memory (`files` empty). */
export function buildManifest(records: RunRecords, finishedAt: Date): Manifest {
  const tally = new ClosingTally(records.record, records.unrecorded);
  for (const campaignId of records.record.campaign_ids) {
    const plan = records.plans.get(campaignId);
    tally.add(campaignId, plan, records.units);
  }
  return tally.manifest(finishedAt);
}
