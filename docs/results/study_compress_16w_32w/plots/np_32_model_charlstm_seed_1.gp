set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/study_compress_16w_32w/accuracy_vs_epoch_np_32_model_charlstm_seed_1.png'
set title 'study_compress_16w_32w, np=32 model=charlstm seed=1, each at its best lr'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'fp16_2x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'qsgd_16x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'topk_10x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'topk_10x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_5.dat' using 1:2 with linespoints lw 2 pt 6 title 'topk_100x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_6.dat' using 1:2 with linespoints lw 2 pt 7 title 'topk_100x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_7.dat' using 1:2 with linespoints lw 2 pt 8 title 'topk_1000x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_8.dat' using 1:2 with linespoints lw 2 pt 9 title 'topk_1000x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_9.dat' using 1:2 with linespoints lw 2 pt 10 title 'local_8_topk_100x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_10.dat' using 1:2 with linespoints lw 2 pt 11 title 'fedavg_topk_100x'
set output 'docs/results/study_compress_16w_32w/accuracy_vs_time_np_32_model_charlstm_seed_1.png'
set title 'study_compress_16w_32w, np=32 model=charlstm seed=1, each at its best lr'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'fp16_2x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'qsgd_16x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'topk_10x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'topk_10x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_5.dat' using 3:2 with linespoints lw 2 pt 6 title 'topk_100x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_6.dat' using 3:2 with linespoints lw 2 pt 7 title 'topk_100x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_7.dat' using 3:2 with linespoints lw 2 pt 8 title 'topk_1000x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_8.dat' using 3:2 with linespoints lw 2 pt 9 title 'topk_1000x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_9.dat' using 3:2 with linespoints lw 2 pt 10 title 'local_8_topk_100x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_10.dat' using 3:2 with linespoints lw 2 pt 11 title 'fedavg_topk_100x'
set output 'docs/results/study_compress_16w_32w/accuracy_vs_bytes_np_32_model_charlstm_seed_1.png'
set title 'study_compress_16w_32w, np=32 model=charlstm seed=1, each at its best lr'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'fp16_2x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'qsgd_16x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'topk_10x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'topk_10x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_5.dat' using 4:2 with linespoints lw 2 pt 6 title 'topk_100x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_6.dat' using 4:2 with linespoints lw 2 pt 7 title 'topk_100x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_7.dat' using 4:2 with linespoints lw 2 pt 8 title 'topk_1000x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_8.dat' using 4:2 with linespoints lw 2 pt 9 title 'topk_1000x_ef', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_9.dat' using 4:2 with linespoints lw 2 pt 10 title 'local_8_topk_100x', \
     'docs/results/study_compress_16w_32w/plots/np_32_model_charlstm_seed_1_10.dat' using 4:2 with linespoints lw 2 pt 11 title 'fedavg_topk_100x'
