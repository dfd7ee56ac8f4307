import { Duration } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

/**
 * Lambda's advice for an SQS event source: a visibility timeout of at least six times the
 * consumer's timeout, so retries of a throttled or slow invocation do not redeliver early.
 */
export const VISIBILITY_TO_TIMEOUT_RATIO = 6;
/** Dead letters are kept as long as SQS allows, for a person to inspect and redrive. */
const DLQ_RETENTION = Duration.days(14);
/** A run lasts hours; a message older than this belongs to a run long closed. */
const QUEUE_RETENTION = Duration.days(4);

export interface ExporterQueuesProps {
  /** Receives before a message moves to its dead-letter queue. */
  readonly maxReceiveCount: number;
  /** Timeout of plan-campaign, the plan queue's consumer. */
  readonly planConsumerTimeout: Duration;
  /** Timeout of export-reports, the report queue's consumer. */
  readonly reportConsumerTimeout: Duration;
}

export interface WorkQueue {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
}

/** The plan queue (one message per campaign) and the report queue (one per unit of reports), each with a DLQ. */
export class ExporterQueues extends Construct {
  readonly plan: WorkQueue;
  readonly report: WorkQueue;

  constructor(scope: Construct, id: string, props: ExporterQueuesProps) {
    super(scope, id);
    this.plan = this.workQueue('Plan', props.planConsumerTimeout, props.maxReceiveCount);
    this.report = this.workQueue('Report', props.reportConsumerTimeout, props.maxReceiveCount);
  }

  /** Every queue of the stack, dead-letter queues included. */
  get all(): readonly sqs.Queue[] {
    return [this.plan.queue, this.plan.deadLetterQueue, this.report.queue, this.report.deadLetterQueue];
  }

  private workQueue(id: string, consumerTimeout: Duration, maxReceiveCount: number): WorkQueue {
    const deadLetterQueue = new sqs.Queue(this, `${id}Dlq`, {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: DLQ_RETENTION,
    });
    const queue = new sqs.Queue(this, `${id}Queue`, {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: QUEUE_RETENTION,
      visibilityTimeout: Duration.seconds(consumerTimeout.toSeconds() * VISIBILITY_TO_TIMEOUT_RATIO),
      deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount },
    });
    return { queue, deadLetterQueue };
  }
}
