"""Print the capacity planner's predictions against every measured point in the field notes.

Usage: PYTHONPATH=. python bench/fit_accuracy.py
Each row: measurement, quantity, predicted, reported, error %; unreliable reports are flagged with the reason and
left out of the mean absolute error (the planner is not tuned to them). Data: skills/data/field_measurements.yaml.
"""

from __future__ import annotations

from skills.capacity.fit_accuracy import load_measurements, mean_abs_error, rows


def _fmt(x: float | str) -> str:
    if isinstance(x, str):
        return x
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:,.2f}"


def main() -> None:
    table = rows()
    print(f"{'measurement':<22} {'quantity':<22} {'predicted':>12} {'reported':>12} {'error %':>8}")
    for r in table:
        err = "match" if r.error_pct is None and r.predicted == r.reported else ""
        if r.error_pct is None and r.predicted != r.reported:
            err = "MISMATCH"
        if r.error_pct is not None:
            err = f"{r.error_pct:+.1f}"
        flag = f"  [unreliable: {r.unreliable}]" if r.unreliable else ""
        flag += f"  [calibration point: {r.calibrates}]" if r.calibrates else ""
        print(f"{r.measurement:<22} {r.quantity:<22} {_fmt(r.predicted):>12} {_fmt(r.reported):>12} {err:>8}{flag}")
    counted = [r for r in table if r.counts]
    print(f"\nmean absolute error over {len(counted)} reliable numeric points: {mean_abs_error(table):.1f}%")
    print("(calibration points and unreliable reports are shown but not counted)")
    for m in load_measurements():
        why = m.assumed.get("why")
        if why:
            print(f"assumed for {m.id}: {', '.join(f'{k}={v}' for k, v in m.assumed.items() if k != 'why')} — {why}")


if __name__ == "__main__":
    main()
