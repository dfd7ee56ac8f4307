import { RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { REQUEST_BUDGET_TABLE_KEY } from '../../shared/aws/request-budget-table.js';

/** The item operations of the budget (functions/aws/request-budget.ts): a consistent read and a conditional put. */
export const REQUEST_BUDGET_ACTIONS = ['dynamodb:GetItem', 'dynamodb:PutItem'] as const;
/** The fetcher slots' operations (functions/aws/fetcher-slots.ts): a conditional put and delete. */
export const FETCHER_SLOT_ACTIONS = ['dynamodb:PutItem', 'dynamodb:DeleteItem'] as const;

/**
 * The deployment's request budget: a DynamoDB table holding one item, the token bucket that
 * every function calling the API leases its requests from (shared/api/request-budget.ts), so
 * that `rateCeiling` bounds the deployment rather than each container.
 */
export class RequestBudget extends Construct {
  readonly table: dynamodb.Table;
  readonly tableName: string;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: {
        name: REQUEST_BUDGET_TABLE_KEY.name,
        type: dynamodb.AttributeType[REQUEST_BUDGET_TABLE_KEY.type === 'S' ? 'STRING' : 'NUMBER'],
      },
      // A few requests per second while a run lasts, nothing in between. It holds the fetcher
      // slots' items too (functions/aws/fetcher-slots.ts).
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      // The item is a rate and a schedule a few seconds long, rebuilt by the first lease.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.tableName = this.table.tableName;
    const reason =
      'The table holds one item, the request rate and the next few seconds of its schedule, rebuilt by the first lease after any loss: a backup or a point-in-time restore would bring back a stale rate and nothing else.';
    Validations.of(this.table).acknowledge({ id: 'AwsSolutions-DDB3', reason });
  }

  /** Lets export-reports take and release fetcher slots: PutItem and DeleteItem on this table only. */
  grantFetcherSlots(grantee: iam.IGrantable): iam.Grant {
    return iam.Grant.addToPrincipal({
      grantee,
      actions: [...FETCHER_SLOT_ACTIONS],
      resourceArns: [this.table.tableArn],
    });
  }

  /** Lets a function lease from the budget: GetItem and PutItem on this table only. */
  grantUse(grantee: iam.IGrantable): iam.Grant {
    return iam.Grant.addToPrincipal({
      grantee,
      actions: [...REQUEST_BUDGET_ACTIONS],
      resourceArns: [this.table.tableArn],
    });
  }
}
