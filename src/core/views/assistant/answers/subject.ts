// What an answer is about: one recording (a file, or a process of the run followed now), and that run for the actions.
import type { Model } from '../../../base/model/types';

/** A process of the run followed now; `model` when the host already reads its capture (the extension's LiveRun). */
export interface LiveProcess {
  pid: number;
  rank?: number;
  capture: string;
  /** its control socket, when it can take commands */
  socket?: string;
  model?: Model;
}

export interface LiveTarget {
  /** the run's name for people (its session folder) */
  name: string;
  /** still producing events */
  running: boolean;
  processes: LiveProcess[];
}

/** The run followed now, or the sentence that says why there is none and what to do instead. */
export type LiveLookup = LiveTarget | { none: string };

/** One recording a tool answers about. */
export interface Recording {
  model: Model;
  /** the path the answer names */
  file: string;
  /** said in the answer: which process of a live run this is, or which capture of a folder */
  note?: string;
}
