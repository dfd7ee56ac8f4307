/**
 * The IAM guard for a test file: loads the synthesized stack and hooks the SDK clients before
 * the file's own `beforeAll` (register it first), fails each test that made a call the stack
 * does not grant, and takes the hooks off at the end.
 */
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { Deployment } from './deployment.js';
import { IamGuard } from './guard.js';

/**
 * Registers the hooks; call the returned function (in hooks or tests) for the guard. Create the
 * aws-sdk-client-mock mocks at describe scope, before: the guard goes in front of them.
 *
 * @param context CDK context of the stack (cdk.json's plus these).
 */
export function useIamGuard(context: Record<string, unknown> = {}): () => IamGuard {
  let guard: IamGuard | undefined;
  beforeAll(async () => {
    guard = new IamGuard(await Deployment.load(context));
    guard.install();
  });
  afterEach(() => {
    if (guard === undefined) return;
    guard.assertInstalled();
    const problems = guard.problems();
    guard.clear();
    expect(problems, 'AWS calls the stack does not grant').toEqual([]);
  });
  afterAll(() => guard?.uninstall());
  return () => {
    if (guard === undefined)
      throw new Error('the IAM guard is made in beforeAll: use it in a hook or a test');
    return guard;
  };
}
