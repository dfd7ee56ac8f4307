/**
 * The key of the request budget's DynamoDB table: the stack creates the table with it, the
 * handlers' store and the tests' local DynamoDB use it (one item per deployment).
 */
export const REQUEST_BUDGET_TABLE_KEY = { name: 'pk', type: 'S' } as const;
