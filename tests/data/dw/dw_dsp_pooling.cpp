// dw_dsp_pooling.cpp -- reference-output harness for descbench's `dsp` family over `sift`.
//
// This file is descbench's own code. It contains no code from the C++ DescriptorWorkbench
// (F-Sossi/DescriptorWorkbench); it is compiled together with, and calls, the workbench's
// unmodified source files at commit b834e17 (SIFTWrapper, DomainSizePooling, NoPooling), which
// are never copied into descbench. Build and fixture: make_dsp_pooling_fixtures.py.
//
// Usage:
//   dw_dsp_pooling IMAGE KEYPOINTS OUTDIR
//
// IMAGE and KEYPOINTS as for dw_descriptors.cpp (cv::imread IMREAD_COLOR, then COLOR_BGR2GRAY as
// the experiment runner does for a descriptor without use_color; one keypoint per line, seven
// C99 hex floats "x y size angle response octave class_id"). OUTDIR receives, per output NAME,
// "<NAME>.f32" (row-major float32, one row per keypoint in input order) and a line
// "<NAME> <rows> <cols>" in OUTDIR/manifest.txt. Outputs (SCALES: "default" = DescriptorParams'
// {1.0, 1.5, 2.0}, "085" = {0.85, 1.0, 1.3}, the fusion experiments' DSPSIFT scales):
//
//   SIFT__raw           wrappers::SIFTWrapper::extract on the grey image (OpenCV's SIFT rows).
//   SIFT__pipeline      the same through NoPooling::computeDescriptors with default params (the
//                       runner's `SIFT`: rows L2-normalised).
//   DSP_SIFT__<SCALES>  DomainSizePooling::computeDescriptors (b834e17: its Gaussian pyramid of
//                       the grey image, one level per scale) with SIFTWrapper and default params
//                       except pooling DOMAIN_SIZE_POOLING and the scales: what the runner computes
//                       for a `SIFT` entry with `pooling: domain_size_pooling`.
//   DSP_SIFT_ORIGINAL__<SCALES>
//                       the workbench's documented definition (docs/pooling_semantics.md, "fixed
//                       image, variable support"), which its pre-YAML DomainSizePooling overloads
//                       computed until commit b9b6b46: for each scale a, every keypoint copied
//                       with size * a (its octave field and everything else kept), SIFTWrapper on
//                       the unchanged grey image, the rows summed, divided by the number of scales,
//                       then each row cv::normalize'd (L2) with the workbench's normalizeRows. The
//                       loop is written here (those overloads take the removed experiment_config
//                       and cannot be compiled against b834e17); the rows are the workbench's
//                       SIFTWrapper's.

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "src/core/config/ExperimentConfig.hpp"
#include "src/core/descriptor/extractors/wrappers/SIFTWrapper.hpp"
#include "src/core/pooling/DomainSizePooling.hpp"
#include "src/core/pooling/NoPooling.hpp"
#include "src/core/pooling/pooling_utils.hpp"

#include "dw_keypoints.hpp"  // read_keypoints: the generators' keypoint file

namespace {

namespace tp = thesis_project;

void write(const std::string& outdir, const std::string& name, const cv::Mat& m, std::ofstream& manifest,
           size_t n_kps) {
    if (m.type() != CV_32F || m.rows != static_cast<int>(n_kps)) {
        throw std::runtime_error(name + ": not one CV_32F row per keypoint");
    }
    std::ofstream out(outdir + "/" + name + ".f32", std::ios::binary);
    for (int r = 0; r < m.rows; ++r) {
        out.write(reinterpret_cast<const char*>(m.ptr<float>(r)), static_cast<std::streamsize>(sizeof(float) * m.cols));
    }
    if (!out) throw std::runtime_error("write failed: " + name);
    manifest << name << " " << m.rows << " " << m.cols << "\n";
}

cv::Mat original_image_dsp(const cv::Mat& gray, const std::vector<cv::KeyPoint>& kps, const std::vector<float>& scales,
                           const tp::DescriptorParams& params) {
    cv::Mat sum;
    for (float a : scales) {
        std::vector<cv::KeyPoint> scaled = kps;  // a copy: octave, angle, position kept
        for (auto& k : scaled) k.size = k.size * a;
        tp::wrappers::SIFTWrapper sift;
        cv::Mat d = sift.extract(gray, scaled, params);
        if (d.rows != static_cast<int>(kps.size())) throw std::runtime_error("SIFT dropped keypoints");
        if (sum.empty()) sum = cv::Mat::zeros(d.size(), d.type());
        sum += d;
    }
    sum.convertTo(sum, sum.type(), 1.0 / static_cast<double>(scales.size()));
    tp::pooling::utils::normalizeRows(sum, cv::NORM_L2);
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: " << argv[0] << " IMAGE KEYPOINTS OUTDIR\n";
        return 2;
    }
    try {
        const cv::Mat bgr = cv::imread(argv[1], cv::IMREAD_COLOR);
        if (bgr.empty()) throw std::runtime_error(std::string("cannot read image ") + argv[1]);
        cv::Mat gray;
        cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
        const std::vector<cv::KeyPoint> kps = read_keypoints(argv[2]);
        const std::string outdir = argv[3];
        std::ofstream manifest(outdir + "/manifest.txt");

        tp::config::ExperimentConfig::DescriptorConfig cfg;
        cfg.name = "SIFT";
        cfg.params = tp::DescriptorParams{};
        tp::wrappers::SIFTWrapper sift;
        write(outdir, "SIFT__raw", sift.extract(gray, kps, cfg.params), manifest, kps.size());
        tp::pooling::NoPooling none;
        write(outdir, "SIFT__pipeline", none.computeDescriptors(gray, kps, sift, cfg), manifest, kps.size());

        const std::vector<std::pair<std::string, std::vector<float>>> scale_sets = {
            {"default", cfg.params.scales}, {"085", {0.85f, 1.0f, 1.3f}}};
        for (const auto& [tag, scales] : scale_sets) {
            tp::config::ExperimentConfig::DescriptorConfig dsp = cfg;
            dsp.params.pooling = tp::PoolingStrategy::DOMAIN_SIZE_POOLING;
            dsp.params.scales = scales;
            tp::pooling::DomainSizePooling pooling;
            write(outdir, "DSP_SIFT__" + tag, pooling.computeDescriptors(gray, kps, sift, dsp), manifest, kps.size());
            write(outdir, "DSP_SIFT_ORIGINAL__" + tag, original_image_dsp(gray, kps, scales, dsp.params), manifest,
                  kps.size());
        }
    } catch (const std::exception& e) {
        std::cerr << "dw_dsp_pooling: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
