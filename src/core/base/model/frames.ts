// Which frame of a stack a line is attributed to (DESIGN §3): one rule for everything above the model (leak
// keepers, the OOM notification, the snapshot panel's stacks), so it lives beside Frame.
import type { Frame } from './types';

/**
 * The innermost frame in user code, else the innermost frame (DESIGN §3 line attribution). Which frames
 * are the user's is the reader's one rule (Note [User frames]): each frame arrives with `user` set.
 */
export function userFrame(frames: readonly Frame[]): Frame | undefined {
  return frames.find((f) => f.user) ?? frames[0];
}
