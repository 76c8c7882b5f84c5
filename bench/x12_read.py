"""CPU cost of the X12 reader (and the 210 mapping) on one large file, in process.

The file is a real carrier invoice, 210-MGCTLYST-SAMPLE.EDI's transaction set
(31 segments, one per line), repeated with its own control numbers under one
ISA/GS: by default 100,000 sets, about 60 MB. Prints MB/s of CPU time
(``time.process_time``) for ``read_file`` and for ``map_file`` after it.

    PYTHONPATH=. python -m bench.x12_read [--invoices 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import time

from services.tuning.gcpause import collector_paused
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.reading.reader import read_file

_ISA = (
    b"ISA*00*          *00*          *02*SCAC           *ZZ*MGCTLYST       "
    b"*160726*0528*U*00401*000001838*0*T*:~\nGS*IM*SCAC*MGCTLYST*20160726*0528*1838*X*004010~\n"
)
_SET = (
    b"ST*210*%(n)09d~\nB3**%(n)09d*75027674*TP**20160707*65940**20160708*035*SCAC*20160707~\n"
    b"G62*86*20160707~\nN1*SH*CATALYST PAPER~\nN3*ABC ROAD~\nN4*BOSTON*MA*01890~\n"
    b"N1*CN*ST JOSEPHS HOSPITAL~\nN3*119 SNOW ST~\nN4*CONCORD*OH*L4K~\nN1*BT*CATALYST PAPER~\n"
    b"N3*3600 LYSANDER LN~\nN4*RICHMOND*VA*55203~\nLX*1~\nL5*1*SKIDS PAPER~\n"
    b"L0*1***7889*G***3*PCS~\nL1*1*46.09*PH*363604~\nL7*******70~\nLX*2~\nL5*2~L0*2~\n"
    b"L1*2***1500****CUS~\nLX*3~\nL5*3*FUEL SUR CHG  00.72%%~\nL0*3~\n"
    b"L1*3*26.27*FR*2627****FUE~LX*4~\nL5*4*DISCOUNT~\nL0*4~\nL1*4***-301791****DSC~\n"
    b"L3*7889*G***65940******3~\nSE*31*%(n)09d~\n"
)


def x12_file(invoices: int) -> bytes:
    sets = b"".join(_SET % {b"n": n} for n in range(1, invoices + 1))
    return _ISA + sets + b"GE*%d*1838~\nIEA*1*000001838~\n" % invoices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invoices", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    data = x12_file(args.invoices)
    megabytes = len(data) / 1e6
    print(f"{args.invoices:,} invoices, {megabytes:.1f} MB")
    for _ in range(args.runs):
        gc.collect()
        with collector_paused():  # as the front door reads and maps
            started = time.process_time()
            interchanges = read_file(data)
            read = time.process_time() - started
            mapped = map_file(interchanges, contract_version=1, partition_key=None, period=None)
            both = time.process_time() - started
        assert len(mapped.documents) == args.invoices
        print(
            f"read_file {read:.2f} s CPU = {megabytes / read:.0f} MB/s; "
            f"read + map_file {both:.2f} s = {megabytes / both:.0f} MB/s"
        )
        del interchanges, mapped


if __name__ == "__main__":
    main()
