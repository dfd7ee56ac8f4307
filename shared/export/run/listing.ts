/**
 * What start-run and plan-campaign do with each item a listing yields, so that every item is
 * accounted for: a valid one is handed back (and written raw), an invalid one is written raw,
 * quarantined, counted and reported, and one listed again is counted as a duplicate, and
 * quarantined as well when its content differs from the copy that was used.
 */
import type { ListedItem, ValidationIssue } from '../../api/client.js';
import { TOO_DEEP } from '../../api/json-depth.js';
import type { JsonLinesBuffer } from '../format/jsonl.js';
import { rawLine } from '../raw-lines.js';
import { quarantine } from '../state/quarantine.js';
import type { RunRef } from '../state/records.js';
import type { ExportDeps } from './context.js';

/** The items of one listing: campaigns (no `campaignId`) or one campaign's jobs. */
export class ListingTally {
  /** Items that failed validation. */
  invalid = 0;
  /** Items listed again on a later page. */
  duplicates = 0;
  #position = 0;

  /** `position`: items the listing took before this tally (a listing resumed from a checkpoint). */
  constructor(
    private readonly deps: ExportDeps,
    private readonly run: RunRef,
    private readonly rawLines: JsonLinesBuffer,
    private readonly campaignId?: number,
    position = 0,
  ) {
    this.#position = position;
  }

  /** Items taken so far (those before this tally included): the next item's position. */
  get position(): number {
    return this.#position;
  }

  /** Accounts for one listed item; resolves to the item when it is valid and new. */
  async take<T>(listed: ListedItem<T>): Promise<T | undefined> {
    const position = this.#position++;
    const fetchedAt = this.deps.now().toISOString();
    if (listed.kind === 'repeat') {
      this.duplicates++;
      if (!listed.changed) return undefined;
      const what = this.campaignId === undefined ? 'campaign' : 'job';
      const issue = {
        path: 'id',
        code: 'duplicate',
        message: `${what} ${listed.id} listed again with other content; the first copy was used`,
      };
      await this.keep(listed.raw, [issue], position, fetchedAt);
      return undefined;
    }
    // A value too deep to write has no raw line: the quarantine keeps it, as text.
    const tooDeep = listed.kind === 'invalid' && listed.issues.some((issue) => issue.code === TOO_DEEP);
    if (!tooDeep) {
      const path = this.campaignId === undefined ? {} : { campaign_id: this.campaignId };
      this.rawLines.add(rawLine(this.run.run_id, fetchedAt, listed.raw, path));
    }
    if (listed.kind === 'item') return listed.item;
    this.invalid++;
    await this.keep(listed.raw, listed.issues, position, fetchedAt);
    return undefined;
  }

  /** Quarantines an item and says so on the log: a person should know the data is incomplete. */
  private async keep(
    body: unknown,
    issues: readonly ValidationIssue[],
    position: number,
    fetchedAt: string,
  ): Promise<void> {
    const name =
      this.campaignId === undefined
        ? `campaigns-item-${position}`
        : `campaign-${this.campaignId}-jobs-item-${position}`;
    const key = await quarantine(this.deps.storage, this.run, { name, body, issues, fetched_at: fetchedAt });
    const first = issues[0];
    this.deps.log.warn(this.campaignId === undefined ? 'campaign item quarantined' : 'job item quarantined', {
      ...(this.campaignId === undefined ? {} : { campaign_id: this.campaignId }),
      position,
      ...(first ? { issue: `${first.path || '(item)'}: ${first.message}` } : {}),
      key,
    });
  }
}
