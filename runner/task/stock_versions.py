"""The reference-kernels `eval.py` versions our harness knows, by SHA-256 of the file as committed (docs/authoring.md).

Every version of every `problems/**/eval.py` in gpu-mode/reference-kernels' history (all branches), and of the other
harness files that task.yml files ship under the name eval.py (`nvidia/eval_better_bench*.py`,
`nvidia/nvfp4_gemm/eval_vicki.py`), was read and sorted in one of two tables:

* STOCK_VERSIONS: the stage contract matches our supervisor/worker harness (stages test/benchmark/leaderboard/profile,
  `generate_input(**case)` per case, one `custom_kernel(data)` call per timed sample, `check_implementation(data,
  output)` returning (ok, message) or a message, mean/std/err/best/worst in ns, multi-rank through `world_size`). When
  a board asks for `harness: kernelbot`, our harness judges it in place of the stock file.
* NOT_REPRODUCED: what the version does that our harness does not; such a board keeps its own harness, unprotected,
  and says why (runner/task/harness_choice.py, `protection_of`).

A hash in neither table is an unknown file: also unprotected. tests/runner/test_stock_versions.py checks these tables
against the upstream files where a copy of the repository is at hand.
"""

from __future__ import annotations

RENAMED_STAGES = ("an unmerged branch that renames the stages to private/public, which the runner never invokes")
CUDA_GRAPH_TIMER = ("times a CUDA graph of many unrolled calls replayed on one input, minus the measured L2-flush time; our "
    "harness times single calls on fresh inputs")
MODULE_INPUTS = ("inputs hold a KV-cache torch.nn.Module and a config object, which cannot cross our supervisor/worker wire "
    "(tensors and plain containers only)")
TWO_ENTRY_POINTS = ("no generate_input/check_implementation: two entry points (forward, backward), per-phase inputs, combined "
    "forward+backward timing and a speed-up score against a baseline")
UNCLONED_INPUTS = ("hands the kernel its inputs uncloned (the aiter fused MoE is said to give wrong results on copied weights); "
    "our worker always receives copies")
YAML_CASES = ("reads the case file as YAML (an experimental per-problem copy), while the runner writes case lines")
COMPILE_WITH_INPUT = ("compile_kernel takes a fixed generated input before the stages (replaced the same day)")

BATCH_LINALG_NOTE = ("a batch of up to 50 fresh inputs in one timing window, as many as fit in 256 MiB of input (the "
    "first input's tensor bytes, which is upstream's batch*n*n*4), time / batch; a sample of each batch checked")
BATCH_50_NOTE = "a batch of 50 fresh inputs in one timing window, time / 50; a sample of each batch checked"
BATCH_15_NOTE = "a batch of 15 fresh inputs in one timing window, time / 15; a sample of each batch checked"

STOCK_VERSIONS: dict[str, tuple[str, str]] = {  # sha256 -> (upstream paths, what our harness reproduces)
    "027365d652c3e75ca675f406fba3929073f45f5f7a716fb39c924a8f59704ce2":
        ("problems/amd/eval.py",
         "host timer, no profile stage"),
    "5e91c1b59e1ab2fddf23d60ca137806c837e29cc72bc59dfcd5a338839e82fa6":
        ("problems/amd/eval.py",
         "host timer, profile stage"),
    "87b46b2ed4dbe728c480a1743293cc8e794d7e7bf023ce46e7977f997b3e5722":
        ("problems/amd/eval.py",
         "host timer, checker returns a message (empty = pass), no profile stage"),
    "bbb5baceff3d166721f7a1f6c1070384d97ba9ee075c2a3532b9f8079e0e58fd":
        ("problems/amd/eval.py",
         "host timer, no profile stage"),
    "d0a0c0a3f3f54a1c56323b1f480fbf5bb31a7c7b497e9eb489f287bba38d33d4":
        ("problems/amd/eval.py",
         "host timer, profile stage"),
    "e358dd1e23dea1ff4547576982cb20516fdc60a89b08f4ca82ab8c0e4032942e":
        ("problems/amd/eval.py",
         "host timer; non-tensor inputs deep-copied"),
    "7a762dc03ff2ea8e9b9767f48cc5259e45bd2dcd2fbc7b74f302376442ccd258":
        ("problems/amd/eval.py, problems/nvidia/eval.py, problems/pmpp_v2/eval.py",
         "host perf_counter timer around each call, 100 repeats, (ok, msg) or legacy message checker"),
    "420cc96fe89c5eefc3418282998a44acab8df44eae4c993ca7a7fb87d3bc2533":
        ("problems/amd_202602/eval.py",
         "CUDA events after a large L2 flush, 1000 repeats; booleans in cases"),
    "601424938e19e26622d84c7811daae47740376c152a21efa735e26b4866eaf55":
        ("problems/amd_202602/eval.py",
         "CUDA events after a large L2 flush, 1000 repeats; booleans in cases"),
    "ce5f45066d6ab6c63d650f8952381762a620b90d6906be7973adebc9d2dae5f5":
        ("problems/amd_202602/eval.py",
         "CUDA events after a large L2 flush, 1000 repeats; booleans in cases"),
    "355259e28d2c813621df77a47957aeb96c213997d3ccd535c61493281c4f6afe":
        ("problems/amd_distributed/eval.py",
         "multi-rank, as 666ddf88587c, with per-rank profiling"),
    "666ddf88587c4018daa9e7696a5012b85646f2a284053bd0d308af6ec82b1652":
        ("problems/amd_distributed/eval.py",
         "multi-rank (world_size ranks, generate_input(rank=...), barrier-bounded host timer on rank 0)"),
    "75565ef1c23526c83e7ffc0dba91407bc7a397e6019ec421960621bed5551d2c":
        ("problems/amd_distributed/eval.py",
         "multi-rank, as 666ddf88587c, with per-rank profiling"),
    "da38fd979f6b828afeed47234a6b7f27def9e934edb0d64aeba14a1514bdd102":
        ("problems/amd_distributed/eval.py",
         "multi-rank, as 666ddf88587c, with per-rank profiling"),
    "1a2bf5016ab94dc0feea1b60548a83d4c75182026ed9eeb2d82007212016e1b9":
        ("problems/bioml/trimul/eval.py",
         "CUDA events per call, no L2 flush"),
    "94f5b0a0ff72e797c0c83c30478697a897dc2ac369f8cc8e07dbcd0272803f51":
        ("problems/bioml/trimul/eval.py",
         "CUDA events per call, no L2 flush"),
    "0eda5551d3a8c29fef9607d094dbe29ac7fb96dd8d417f4ef7dd89a747a9079b":
        ("problems/helion/eval.py",
         "as c4a3b1b76a78, plus GPU clock lockdown around timed stages (the clock policy of the runner host here)"),
    "9bbf0841e12bf0e9159e580ffc35889a3f63663814af13a173f2aa9c4449a971":
        ("problems/helion/eval.py",
         "as c4a3b1b76a78, plus optional GPU clock lockdown (the clock policy of the runner host here)"),
    "c4a3b1b76a7834ae4e3889381e2d2dd3d694d5d36274969d88c3eaffc34b2003":
        ("problems/helion/eval.py",
         "CUDA events + L2 flush; case values true/false are booleans"),
    "d23e5756d90c984349f53a23a587b51fe85ea7b3a336f1235428a6a8a2c0f55f":
        ("problems/helion/eval.py",
         "as c4a3b1b76a78, plus GPU clock lockdown (the clock policy of the runner host here)"),
    "7bbde85d8c4849c9ec8ca2c8a0adf4f59d2fc5bf1ea1f9de992e38f4d81b7c80":
        ("problems/helion/eval.py, problems/nvidia/eval.py, problems/pmpp_v2/eval.py",
         "CUDA events per call after a 256 MiB L2 flush, 100 repeats, recheck with seed+13 in leaderboard"),
    "3026c9f6cef0c6fbb37cf5021c850ed4ff7cc9c45b6cf4ceacde58543becb859":
        ("problems/nvidia/eval.py",
         "CUDA events + L2 flush, 200 repeats, CuTe OpError as a failure"),
    "4310798853ded3cfe39d746863f76e08771a1a76a054e8119ee0eda1fe4b7b16":
        ("problems/nvidia/eval.py",
         "CUDA events + L2 flush, 200 repeats, at least 100 ms per case"),
    "76ab647d36f1b187394c27a6436ecd153c24cd0fe4ecb10802edc25ecdd6e0ee":
        ("problems/nvidia/eval.py",
         "as fef54da05e87; the submission also exports compile_kernel (called untimed)"),
    "c12a975cadda0771c9c4a42a83f80cbd98babe274f91ba93a26eef44c780d43a":
        ("problems/nvidia/eval.py",
         "as fef54da05e87; the submission also exports compile_kernel (called untimed)"),
    "dc570e98ecaf16f416ffdf1145037d6b2ad8663e2e54bc0b5142ca7becebe039":
        ("problems/nvidia/eval.py",
         "CUDA events + L2 flush, 200 repeats"),
    "fef54da05e87a970d52eeac2665b593eb9b611895b03f008f0a15a8c2f27a9aa":
        ("problems/nvidia/eval.py",
         "CUDA events + L2 flush, 200/1000 repeats, at least 100 ms per case, CuTe OpError as a failure"),
    "9fd69d2e67d058a60f2a9ed85b52fdfcbd6387eb7f60d261941d730ec2952e4f":
        ("problems/nvidia/fp16_gemm/eval.py",
         "CUDA events + L2 flush, 100 repeats"),
    "c0ddda6e9865691f2613dcbd4d5a76dfed25f93e74e9bbb0719bcabe05317e25":
        ("problems/nvidia/nvfp4_dual_gemm/eval.py, problems/nvidia/nvfp4_gemm/eval.py, problems/nvidia/nvfp4_gemv/eval.py",
         "compile_kernel() once before timing (called untimed by our worker), CUDA events + L2 flush"),
    "18bde1c687bc00d5959efe4f3a1ac54c16b339d618742bc2f9b90bb74416e20c":
        ("problems/nvidia/nvfp4_dual_gemm/eval.py, problems/nvidia/nvfp4_gemv/eval.py",
         "compile_kernel() once before timing (called untimed by our worker), CUDA events + L2 flush"),
    "71bfe889147bee00f7f8f4ea1e8a99fa13da41b90fb62b285f693cd9555ac4ed":
        ("problems/nvidia/nvfp4_gemm/eval.py",
         "CUDA events + L2 flush, 100 repeats"),
    "45815558e97bb130f45346874fe749003818bf3ee46cf125d224b1a72608e9f3":
        ("problems/nvidia/nvfp4_gemv/eval.py",
         "CUDA events + L2 flush, 100 repeats"),
    "7a5fa010879b95745bce23d3f00f433621030ad6ed402e2ae9e08c9d41d101bd":
        ("problems/nvidia/nvfp4_group_gemm/eval.py",
         "case values may be (a, b) tuples or [a, b] lists; CUDA events + L2 flush"),
    "86ec61c29b2ca8a7eb696ba60c2bce90a3fe23464ee0fad7071738067f9d1a17":
        ("problems/nvidia/nvfp4_group_gemm/eval.py",
         "case values may be tuples or lists; CUDA events + L2 flush"),
    "b1e984d50dbd43745a3c4566fb63c75bc04ee5ae3401603176a06481e64a1c01":
        ("problems/nvidia/nvfp4_group_gemm/eval.py",
         "case values may be tuples or lists; CUDA events + L2 flush"),
    "bd83a3bec2e35df76ec8f88ab9919a1e41436a265551e8864c47c293aee95de9":
        ("problems/nvidia/nvfp4_group_gemm/eval.py",
         "case values may be tuples or lists; CUDA events + L2 flush"),
    "cd75c08a17ed8ebfe0009624baae740be2e1910308bcf15cf093448b37a6af6c":
        ("problems/nvidia/nvfp4_group_gemm/eval.py",
         "case values may be tuples or lists; CUDA events + L2 flush"),
    "e86be0faaff39beb004b54df199cfd78db812d186fe73d3b5e24378f9b5fb291":
        ("problems/nvidia/nvfp4_group_gemm/eval.py",
         "case values may be tuples or lists; CUDA events + L2 flush"),
    "a9bff7c76e9e1609310f936085cbb1b2070fe093157314fb546900cdd226b9ce":
        ("problems/pmpp/eval.py",
         "the amd 2025 harness (host timer, profile stage)"),
    "c33495f16f64c20b7c3412efa66b5fe6760ec23021f66ff53432d95fc17e5e10":
        ("problems/pmpp/eval.py",
         "single process, 0.2 s warm-up, no secret-seed mixing, no profile stage"),
    "d1b70ced1b98df1dfd2dbbcea8396cc9b2042b81216dd6a25de1bbe50cd5b5ac":
        ("problems/pmpp/eval.py",
         "single process, 0.2 s warm-up, no secret-seed mixing, no profile stage"),
    "ff5f0082ed2a676c64f027699cf7a0ad4f222a0ff0fed04d7ced95c20cc78840":
        ("problems/pmpp_v2/eval.py",
         "host perf_counter timer, 100 repeats"),
    # Batched timing (docs/authoring.md, "Batched timing"; the rule each ships in BATCHED_TIMING below).
    "0105fca80c0b81e0f52e9423781cb11b575a235494618e571b98f699730a0206":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "251cfb0229288352c820e1941d5d7c40e4bc9b312692b0bb40f8eebeeee885ee":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "2d591b88923f638ad600b96b1d9ebe6479a0da4b7f976ac0cc564b206a5ae5b2":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "3ee309171dbc484ce0fda4ac98d28f8739e6ff491f2ceff99db1dc8ba0fc50ac":
        ("problems/linalg/qr_py/eval.py, problems/linalg/qr_v2/eval.py",
         BATCH_LINALG_NOTE),
    "502670f1a129a01e1a7770f277643b5b965f603ed776cc0e5a3e0bee02869b3f":
        ("problems/linalg/qr_v2/eval.py",
         BATCH_LINALG_NOTE),
    "625e6ae7094d2331f119f9987ade658837f09eb293c477fafd569788cdaf6a0c":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "8bcac2b5dcbace3ec2172d6508c0313520748280f52d769a8ef4e6d829db60aa":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "a3ad23cefde5ad710e17045b7f9e739bba4f3b36c619dde78afb1def77e1959b":
        ("problems/linalg/qr_py/eval.py, problems/linalg/qr_v2/eval.py",
         BATCH_LINALG_NOTE),
    "ad577ad69c360c43eb68997ea17e2fe14b83848f7a446aa735e379060d4cba42":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "ae6b06864867668dc62ec614d0f3d2b093525fd48d05c8586ba276596e668492":
        ("problems/linalg/eigh_v2/eval.py",
         BATCH_LINALG_NOTE),
    "b0215faa2c46d2f59df0fb759fd00c341b66465b63f2c716f167ad4ac99bc891":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "c4c6ec6dd8949768be9b876962f3b4b9be9ad163fc460fd786942372b5ba654a":
        ("problems/linalg/cholesky_py/eval.py",
         BATCH_LINALG_NOTE),
    "ed7cb264e14428576113f27ad8f5fb9c432f11014bba2402618f24862c41a6a8":
        ("problems/corepack/qr_py/eval.py, problems/linalg/qr_py/eval.py",
         BATCH_LINALG_NOTE),
    "f798a40d234e28e6b456e1aa5bdc3fa93fca3643796501343d7b31f5b74e1e3d":
        ("problems/linalg/eigh_py/eval.py",
         BATCH_LINALG_NOTE),
    "106951f2f0e9ea02f4c97fc3023ee2402e9d64fdf059b14ac3653b85062f4232":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "36835224754f9b5c125e4f0ce16b35024d6c6cf342c66d786770277f1f20a712":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "380734c7f47e467333140c0522a45c6f0ceaff9885f8a45a0c017b582d0f6973":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "46e23e266bc8c13c2151709b2e94b13938f869f6495260682ff569b7fc58d04a":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "538bc356ee202f6198316eee107cd04982b2030c1091ba41e2fb22db9bc21565":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "58c38182aaaaedef58a6151228478ee6ed56fbb11496d7bc54fc9fe827abeb75":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "63f89aa52c58f21810a2b3f3fef1bd231619393ef4a8a4035b95cb7d6c902714":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "99b28b74fa05fa8542be83f2ae55a93588963227cf8aee37935186e7d10f10da":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "9fec0075d3b8782d2d81dccacd38e08684574c69595db08b4034e1c187be9a26":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "cf1b131646b0ef6989afd5ff917d5908cd73d406da827625c3efd7ab770f5fda":
        ("problems/nvidia/eval_better_bench.py",
         BATCH_50_NOTE),
    "082ddacf7a88692da2b46e3864f848c9c2afd7085433b19977b72c8360b22e4a":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py",
         BATCH_15_NOTE),
    "13d04864538ae4187859788c7249b66252a06a4853e887cd21cd47e1a7b51566":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py",
         BATCH_15_NOTE),
    "47d688c3725a2d3780a78b7bc39eca0dc3826471e78fa75eddc7867397470414":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py",
         BATCH_15_NOTE),
    "75fd3c0c371f497ac337519d1392439cb88d32014b86be9ebf81ab9c5791a533":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py",
         BATCH_15_NOTE),
    "8fbb9c03a7d57115c530f47c95b98cc589fda017e7a07d35890e5a09a18a7fe9":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py",
         BATCH_15_NOTE),
    "adfbf61a62b98a7c3b2fa63d54c382b60c8248ba547d8e5a221926e3b23cfc15":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py",
         BATCH_15_NOTE),
    "f30c7eef11d79f109f5ea2f508fa905b1598e793975d3299a504ae20e81b94a5":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py",
         BATCH_15_NOTE),
}

NOT_REPRODUCED: dict[str, tuple[str, str]] = {  # sha256 -> (upstream paths, why our harness cannot take over)
    "5f54cee8e5b16e9115c489cc167f6137cbf365559f9ceae4d44ce53fbba25b87":
        ("problems/amd/eval.py", RENAMED_STAGES),
    "3f1aab085cd60125905bc3b466f288c48c32cf80e3af408a26dcd58e340412f2":
        ("problems/amd/mla-decode/eval.py", MODULE_INPUTS),
    "6498f269313213c5423c9f1b2aa757f2c0489f7589b3a67275b7ace2a87acd01":
        ("problems/amd/mla-decode/eval.py", MODULE_INPUTS),
    "ff7f51980458cc64b9ddca195bcbf7f6104a60a4c74ebd6960b74807defa4b13":
        ("problems/amd/mla-decode/eval.py", MODULE_INPUTS),
    "365f5182a7defad5f0370e94fad1d3d0c7171c8ebea8e6a05abefee58a1299ef":
        ("problems/amd_202602/moe-mxfp4/eval.py", UNCLONED_INPUTS),
    "ae931636a20837c0a6765fd86105734e51f91bcf8e5facbe36002e32d8d9ea65":
        ("problems/amd_202602/moe-mxfp4/eval.py", UNCLONED_INPUTS),
    "2b925cb5e85db4280251c2cf5363eac10c6c449902be1eed88cad0e2cdf62fed":
        ("problems/amd_distributed/eval.py", RENAMED_STAGES),
    "1ffb684c90d8999eb8536725d60227b13f39d07933987b0e8736a2c3fcf72051":
        ("problems/bioml/trimul/eval.py", RENAMED_STAGES),
    "1cfede319ce057301146f3f8e8bea1aeaab31701bf19d88004aeb339c8c6981b":
        ("problems/helion/eval.py", CUDA_GRAPH_TIMER),
    "aa54edbc0c2fa2ebc2ae328cb75fd629d5ec56cef264e9b8d4685d8de653d802":
        ("problems/helion/eval.py", CUDA_GRAPH_TIMER),
    "ac55e49fdfa4b5c5018e45c3ae32174b6cd2b00c7b6cf03818290097900a7930":
        ("problems/helion/eval.py", CUDA_GRAPH_TIMER),
    "903a7a81a5d1c79bbbe04ee5f58b7ab8eb36ae441bc950be4663e59a259fdc46":
        ("problems/nvidia/eval.py", RENAMED_STAGES),
    "0c6e67a871acdb5abd3d2b76e429110112e108e80f18fab1158d3466b4f8092b":
        ("problems/nvidia/fp16_gemm/eval.py", COMPILE_WITH_INPUT),
    "74031687dda242b0785cab94530d440917c24a629976a7894d35f7808c19ac88":
        ("problems/nvidia/nvfp4_gemm/eval.py", RENAMED_STAGES),
    "405d4ddf97239af60548e618268ba796cd5eda482801bda75af98e7d834038fb":
        ("problems/nvidia/nvfp4_group_gemm/eval.py", RENAMED_STAGES),
    "e9f2e9ce8120da953bfa5b6e412e2dad3d620e56eecba9c0fff422eb61b68970":
        ("problems/pmpp/eval.py", RENAMED_STAGES),
    "1c4ad963dbaa2ba1cdb395bcec411596efb1eb01f9f2b643ad5c184a29d162b5":
        ("problems/pmpp_v2/eval.py", RENAMED_STAGES),
    "37da742399d09e5ec87292d3e190a19f5195d87d0f5c363d15eba4a3bb11e20a":
        ("problems/princeton/cross_entropy_py/eval.py", TWO_ENTRY_POINTS),
    "6d8a6235cf93f3a6bace03aaef3cf9382998a3f413f58e0a8538e4ac9a336978":
        ("problems/princeton/cross_entropy_py/eval.py", TWO_ENTRY_POINTS),
    "8aa7aa09e21f47adb032e6e17de4215810092ed68bf866d3834507cf96405f43":
        ("problems/princeton/cross_entropy_py/eval.py", TWO_ENTRY_POINTS),
    "249f9cdf235f8d122a0edacd0aef2d22e0484ea767115620350226bee3331e1a":
        ("problems/tri/cross_entropy_py/eval.py", TWO_ENTRY_POINTS),
    # Harness files a task.yml ships under the name eval.py (`source: ../eval_better_bench.py`).
    "55e982f7356160305f990cb395b1bac200b179c9bbc7a0ef49b711fe639eca00":
        ("problems/nvidia/eval_better_bench_grouped_gemm.py", RENAMED_STAGES),
    "7953b760981c43df985e67ffe2343deddf657054e2b188d0086ead7405d7a441":
        ("problems/nvidia/nvfp4_gemm/eval_vicki.py", YAML_CASES),
    "b102186791b46dd803e3194773e4e336492e784d7efac02ea1ae6765b51bfcde":
        ("problems/nvidia/eval_better_bench.py", RENAMED_STAGES),
}

# The batch rule of each batched version: (most inputs per timing window, input bytes a batch aims at, or None for
# always the most). Shipped to our harness as harness_contract.json (runner/task/harness_choice.py).
LINALG_BATCH, BETTER_BENCH_BATCH, GROUPED_GEMM_BATCH = (50, 256 * 1024 * 1024), (50, None), (15, None)
BATCHED_TIMING: dict[str, tuple[int, int | None]] = {
    **{sha: LINALG_BATCH for sha, (_, note) in STOCK_VERSIONS.items() if note == BATCH_LINALG_NOTE},
    **{sha: BETTER_BENCH_BATCH for sha, (_, note) in STOCK_VERSIONS.items() if note == BATCH_50_NOTE},
    **{sha: GROUPED_GEMM_BATCH for sha, (_, note) in STOCK_VERSIONS.items() if note == BATCH_15_NOTE},
}
