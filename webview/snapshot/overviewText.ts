// The first view's words (./overviewView.ts), apart from its drawing so that they are testable without a page.
import type { OverviewView } from '../../src/core/base/protocol/snapshot';

type DeviceOverview = OverviewView['devices'][number];

/**
 * What the overview is of: a count of events, or PyTorch's figures for a device recorded without any (figures only:
 * Note [Figures after the events in the index] in native/format/capture_index.h), which "0 events" would misread.
 */
export function overviewOf(d: Pick<DeviceOverview, 'events' | 'device'>): string {
  return d.events > 0
    ? `Overview of ${d.events.toLocaleString('en-US')} events on device ${d.device}`
    : `Overview of PyTorch's figures on device ${d.device} (allocations not recorded one by one)`;
}

