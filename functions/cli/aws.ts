/**
 * `npm run aws -- start|status|runs [options]`: the aws command run from the repository
 * (aws-command.ts).
 */
import { awsCommand } from './aws-command.js';
import { exitWith } from './exit-with.js';

exitWith(awsCommand(process.argv.slice(2), process.env));
