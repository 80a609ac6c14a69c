// The `capacity` input of advice and replay: a size in binary units, read by the one rule of Note [Size input].
import { parseBytes } from '../../../base/units/parseBytes';
import { ToolError } from './toolError';

export function capacityOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  try {
    return parseBytes(text);
  } catch (e) {
    throw new ToolError(`capacity: ${(e as Error).message}`);
  }
}
