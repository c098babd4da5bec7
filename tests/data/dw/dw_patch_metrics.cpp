// Calls the C++ DescriptorWorkbench's patch metrics (src/core/benchmark/PatchMetrics.cpp), patch
// fusion (src/core/patches/PatchFusionExtractor.cpp) and whole benchmark run
// (src/core/benchmark/HPatchesBenchmark.cpp with src/core/patches/PatchLoader.cpp),
// F-Sossi/DescriptorWorkbench commit b834e17, and writes what they return. Built and run by
// make_patch_metrics.py (this folder):
//
//   g++ -O2 -std=c++17 -I<dwb>/src/include -I<dwb>/src/core/benchmark -I<dwb>/src/core/patches
//       -I<dwb>/src/core -I<dwb>/src dw_patch_metrics.cpp <dwb>/src/core/benchmark/PatchMetrics.cpp
//       <dwb>/src/core/patches/PatchFusionExtractor.cpp <dwb>/src/core/benchmark/HPatchesBenchmark.cpp
//       <dwb>/src/core/patches/PatchLoader.cpp $(pkg-config --cflags --libs opencv4)
//   dw_patch_metrics metrics|fusion <cases.bin> <out.bin>
//   dw_patch_metrics run <patches_dir> <num_threads> <out.bin>
//
// run: HPatchesBenchmark::run over every i_*/v_* folder of patches_dir with a descriptor that
// samples 8 pixels of each 65x65 patch (row 32, columns 0, 8, .., 56, as float); out: float32
// mAP_overall, accuracy_overall, mAP_easy, _hard, _tough, _illumination, _viewpoint,
// _illumination_easy, _illumination_hard, _viewpoint_easy, _viewpoint_hard, int32 num_scenes,
// num_patches. Built without OpenMP, so num_threads != 1 takes the per-scene path in one thread.
//
// Little-endian int32 / float32, row-major. metrics: int32 number of cases, then per case int32
// n, m, d and ref[n*d], target[n*d], negatives[m*d]; out per case int32 num_patches,
// correct_matches, float32 match_accuracy, average_precision (computeMatching), computeMAP,
// computeFPR95. fusion: int32 number of cases, then per case int32 method (PatchFusionMethod's
// order: average, weighted_avg, max, min, concatenate, channel_wise), components k, rows n,
// weights w (0 or k), then per component int32 d and float32[n*d], then float32 weights[w]; out
// per case int32 rows, cols and float32[rows*cols]: the fused, normalised descriptors.
#include "HPatchesBenchmark.hpp"
#include "PatchFusionExtractor.hpp"
#include "PatchMetrics.hpp"

#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using thesis_project::benchmark::PatchMetrics;
using thesis_project::patches::IPatchDescriptorExtractor;
using thesis_project::patches::PatchFusionExtractor;
using thesis_project::patches::PatchFusionMethod;

static int32_t read_int(std::ifstream& in) {
    int32_t v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    return v;
}

static cv::Mat read_rows(std::ifstream& in, int rows, int cols) {
    cv::Mat m(rows, cols, CV_32F);
    if (rows > 0 && cols > 0) {
        in.read(reinterpret_cast<char*>(m.ptr<float>(0)), sizeof(float) * rows * cols);
    }
    return m;
}

// A component that returns fixed descriptors, whatever the patches.
class Fixed final : public IPatchDescriptorExtractor {
public:
    explicit Fixed(cv::Mat d) : d_(std::move(d)) {}
    cv::Mat extractFromPatches(const std::vector<cv::Mat>&, const thesis_project::DescriptorParams&) override {
        return d_.clone();
    }
    std::string name() const override { return "fixed"; }
    int descriptorSize() const override { return d_.cols; }
    std::unique_ptr<IPatchDescriptorExtractor> clone() const override { return std::make_unique<Fixed>(d_); }

private:
    cv::Mat d_;
};

// Eight pixels of row 32 of each patch, as float.
class Sampled final : public IPatchDescriptorExtractor {
public:
    cv::Mat extractFromPatches(const std::vector<cv::Mat>& patches, const thesis_project::DescriptorParams&) override {
        cv::Mat d(static_cast<int>(patches.size()), 8, CV_32F);
        for (int i = 0; i < d.rows; ++i) {
            for (int k = 0; k < 8; ++k) {
                d.at<float>(i, k) = static_cast<float>(patches[i].at<uchar>(32, 8 * k));
            }
        }
        return d;
    }
    std::string name() const override { return "sampled"; }
    int descriptorSize() const override { return 8; }
    std::unique_ptr<IPatchDescriptorExtractor> clone() const override { return std::make_unique<Sampled>(); }
};

static int run(const std::string& dir, int threads, const std::string& out_path) {
    using thesis_project::benchmark::HPatchesBenchmark;
    HPatchesBenchmark::Config config;
    config.patches_dir = dir;
    config.num_threads = threads;
    config.verbose = false;
    config.print_results = false;
    Sampled extractor;
    HPatchesBenchmark::Results r = HPatchesBenchmark::run(config, extractor, thesis_project::DescriptorParams{});
    float f[11] = {r.mAP_overall, r.accuracy_overall, r.mAP_easy, r.mAP_hard, r.mAP_tough,
                   r.mAP_illumination, r.mAP_viewpoint, r.mAP_illumination_easy,
                   r.mAP_illumination_hard, r.mAP_viewpoint_easy, r.mAP_viewpoint_hard};
    int32_t n[2] = {r.num_scenes, r.num_patches};
    std::ofstream out(out_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(f), sizeof(f));
    out.write(reinterpret_cast<const char*>(n), sizeof(n));
    return 0;
}

static int metrics(std::ifstream& in, std::ofstream& out) {
    const int32_t cases = read_int(in);
    for (int32_t c = 0; c < cases; ++c) {
        const int32_t n = read_int(in), m = read_int(in), d = read_int(in);
        cv::Mat ref = read_rows(in, n, d);
        cv::Mat tgt = read_rows(in, n, d);
        cv::Mat neg = read_rows(in, m, d);
        if (!in) {
            std::cerr << "truncated input at case " << c << std::endl;
            return 1;
        }
        PatchMetrics::MatchResult r = PatchMetrics::computeMatching(ref, tgt);
        float map = PatchMetrics::computeMAP(ref, tgt);
        float fpr = PatchMetrics::computeFPR95(ref, tgt, neg);
        int32_t ints[2] = {r.num_patches, r.correct_matches};
        float floats[4] = {r.match_accuracy, r.average_precision, map, fpr};
        out.write(reinterpret_cast<const char*>(ints), sizeof(ints));
        out.write(reinterpret_cast<const char*>(floats), sizeof(floats));
    }
    return 0;
}

static int fusion(std::ifstream& in, std::ofstream& out) {
    const int32_t cases = read_int(in);
    for (int32_t c = 0; c < cases; ++c) {
        const int32_t method = read_int(in), k = read_int(in), n = read_int(in), w = read_int(in);
        std::vector<std::unique_ptr<IPatchDescriptorExtractor>> comps;
        for (int32_t i = 0; i < k; ++i) {
            const int32_t d = read_int(in);
            comps.push_back(std::make_unique<Fixed>(read_rows(in, n, d)));
        }
        std::vector<float> weights(w);
        if (w > 0) {
            in.read(reinterpret_cast<char*>(weights.data()), sizeof(float) * w);
        }
        if (!in) {
            std::cerr << "truncated input at case " << c << std::endl;
            return 1;
        }
        PatchFusionExtractor fx(std::move(comps), static_cast<PatchFusionMethod>(method), weights);
        std::vector<cv::Mat> patches(n, cv::Mat::zeros(1, 1, CV_8U));
        cv::Mat f = fx.extractFromPatches(patches, thesis_project::DescriptorParams{});
        int32_t shape[2] = {f.rows, f.cols};
        out.write(reinterpret_cast<const char*>(shape), sizeof(shape));
        for (int r = 0; r < f.rows; ++r) {
            out.write(reinterpret_cast<const char*>(f.ptr<float>(r)), sizeof(float) * f.cols);
        }
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 5 && std::string(argv[1]) == "run") {
        return run(argv[2], std::stoi(argv[3]), argv[4]);
    }
    if (argc != 4) {
        std::cerr << "usage: dw_patch_metrics metrics|fusion <cases.bin> <out.bin> | run <dir> <threads> <out.bin>" << std::endl;
        return 2;
    }
    std::ifstream in(argv[2], std::ios::binary);
    std::ofstream out(argv[3], std::ios::binary);
    const std::string mode = argv[1];
    if (mode == "metrics") return metrics(in, out);
    if (mode == "fusion") return fusion(in, out);
    std::cerr << "unknown mode " << mode << std::endl;
    return 2;
}
